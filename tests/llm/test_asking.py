"""LLMAgent(ask_user=AskUser()): the model asks the person, the run pauses, and the answer
resumes the same tool loop (the answer as the ask_user call's result), not a fresh chat."""

from __future__ import annotations

from app import Agent, AskUser, LLMAgent, ScriptedCall, ScriptedModel, ScriptedReply, tool


@tool
def thermometer(city: str) -> int:
    """The temperature in a city."""
    return 21


async def test_the_model_asks_the_run_pauses_and_the_answer_goes_on_with_the_same_loop():
    model = ScriptedModel(
        [
            ScriptedReply(
                text="Let me see.",
                tool_calls=(
                    ScriptedCall("thermometer", {"city": "Lima"}, id="t1"),
                    ScriptedCall("ask_user", {"question": "Which city?", "choices": ["Oslo", "Lima"]}, id="a1"),
                ),
            ),
            ScriptedReply(text="Oslo it is: 21 degrees."),
        ]
    )
    agent = Agent(LLMAgent(model=model, tools=[thermometer], ask_user=AskUser(), system_prompt="Be brief."))
    paused = await agent.run("What is the weather?")
    asked = paused.interrupt
    assert (
        asked is not None and asked.resumable and (asked.question, asked.choices) == ("Which city?", ("Oslo", "Lima"))
    )
    names = [event["event_name"] for event in paused.messages[-1].events]
    assert names[-3:] == ["USAGE", "ASK_USER", "done"]
    assert [(c.name, c.result) for c in paused.tool_calls] == [("thermometer", 21)]  # the ask is not a tool call
    assert len(model.calls) == 1

    resumed = await agent.resume(paused, "Oslo")
    assert resumed.text == "Oslo it is: 21 degrees." and not resumed.errors
    seen = model.calls[1][0]
    assert [m.role for m in seen] == ["system", "user", "assistant", "tool", "tool"]
    assert seen[1].content == "What is the weather?"  # the paused run's prompt, once: not a fresh chat
    assert [c.name for c in seen[2].tool_calls] == ["thermometer", "ask_user"]
    assert (seen[3].tool_call_id, seen[3].content) == ("t1", "21")
    assert (seen[4].tool_call_id, seen[4].content) == ("a1", "Oslo")


async def test_without_ask_user_the_model_has_no_such_tool():
    model = ScriptedModel([ScriptedReply(text="Hi.")])
    await Agent(LLMAgent(model=model)).run("hello")
    assert [spec.name for spec in model.calls[0][1]] == []
