"""LLMAgent(ask_user=AskUser()): the model asks the person, the run pauses, and the answer
resumes the same tool loop (the answer as the ask_user call's result), not a fresh chat."""

from __future__ import annotations

import pytest

from sentient_assist import Agent, Approval, AskUser, LLMAgent, tool
from sentient_assist.facade import ToolCall
from sentient_assist.testing import ScriptedCall, ScriptedModel, ScriptedReply
from tests.support.agents import asking_llm


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


sent: list[str] = []


@tool(approval=Approval(question="Send this email?"))
def send_email(to: str) -> str:
    """Send an email."""
    sent.append(to)
    return "sent"


def approval_run() -> tuple[Agent, ScriptedModel]:
    model = ScriptedModel(
        [
            ScriptedReply(
                tool_calls=(
                    ScriptedCall("thermometer", {"city": "Oslo"}, id="t1"),
                    ScriptedCall("send_email", {"to": "ana@example.com"}, id="e1"),
                )
            ),
            ScriptedReply(text="Done."),
        ]
    )
    return Agent(LLMAgent(model=model, tools=[thermometer, send_email])), model


async def test_a_tool_that_needs_approval_stops_the_run_naming_the_call_and_yes_runs_it():
    sent.clear()
    agent, model = approval_run()
    paused = await agent.run("Tell Ana the weather.")
    pending = paused.interrupt
    assert pending is not None and pending.kind == "interrupt" and pending.resumable
    assert (pending.reason, pending.question) == ("approval", "Send this email?")
    assert pending.tool_call == ToolCall(id="e1", name="send_email", arguments={"to": "ana@example.com"})
    assert sent == [] and [c.name for c in paused.tool_calls] == ["thermometer"]
    approved = await agent.resume(paused, "Yes")
    assert sent == ["ana@example.com"] and approved.text == "Done."
    (call,) = approved.tool_calls
    assert (call.name, call.result, call.error) == ("send_email", "sent", None)
    seen = model.calls[1][0]
    assert (seen[-1].role, seen[-1].tool_call_id, seen[-1].content) == ("tool", "e1", '"sent"')


async def test_a_refused_call_does_not_run_and_the_model_is_told():
    sent.clear()
    agent, model = approval_run()
    paused = await agent.run("Tell Ana the weather.")
    refused = await agent.resume(paused, "no, not now")
    assert sent == []
    (call,) = refused.tool_calls
    assert (call.name, call.result, call.error) == ("send_email", None, "the user refused this call")
    assert model.calls[1][0][-1].content == "error: the user refused this call"


@pytest.fixture(scope="module")
def asking_server(serve):
    return serve({"ASSIST_AGENT": "tests.support.agents:asking_llm", "ASSIST_LOG_LEVEL": "warning"})


async def test_asking_and_approval_pause_and_resume_the_same_in_process_and_over_http(asking_server):
    local, remote = Agent(asking_llm()), Agent(asking_server.url + "/assist")
    outcomes = []
    for agent in (local, remote):
        asked = await agent.run("ask")
        answered = await agent.resume(asked, "Oslo")
        to_approve = await agent.run("approve")
        approved = await agent.resume(to_approve, "yes")
        assert asked.interrupt is not None and to_approve.interrupt is not None
        outcomes.append(
            (
                asked.interrupt.question,
                answered.text,
                to_approve.interrupt.tool_call,
                approved.text,
                [(c.name, c.result) for c in approved.tool_calls],
            )
        )
    assert outcomes[0] == outcomes[1]
    assert outcomes[0] == (
        "Which city?",
        "Got: Oslo",
        ToolCall(id=outcomes[0][2].id, name="notify", arguments={"to": "ana"}),
        'Got: "notified ana"',
        [("notify", "notified ana")],
    )
