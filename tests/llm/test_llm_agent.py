"""LLMAgent's loop with a ScriptedModel: what reaches the client, read back through the facade."""

from __future__ import annotations

import asyncio
import json

from sentient_assist import Agent, LLMAgent, UsageLimits, tool
from sentient_assist.events import TokenUsage
from sentient_assist.runtime.errors import ModelProviderError
from sentient_assist.testing import ScriptedCall, ScriptedModel, ScriptedReply

running = {"now": 0, "most": 0}


@tool
async def lookup(city: str) -> dict:
    """Weather for a city."""
    running["now"] += 1
    running["most"] = max(running["most"], running["now"])
    await asyncio.sleep(0.05)
    running["now"] -= 1
    return {"city": city, "sky": "sunny"}


def agent_with(*replies: ScriptedReply, **options) -> tuple[Agent, ScriptedModel]:
    model = ScriptedModel(list(replies))
    return Agent(LLMAgent(model=model, tools=[lookup], system_prompt="Be brief.", **options)), model


async def test_text_before_a_tool_call_streams_as_answer_and_the_loop_goes_on():
    agent, model = agent_with(
        ScriptedReply(
            reasoning="Two cities.",
            text="Let me check.",
            tool_calls=(ScriptedCall("lookup", {"city": "Oslo"}), ScriptedCall("lookup", {"city": "Rome"})),
            usage=TokenUsage(input_tokens=10, output_tokens=5, total_tokens=15),
        ),
        ScriptedReply(text="Both sunny.", usage=TokenUsage(input_tokens=30, output_tokens=4, total_tokens=34)),
    )
    events = []
    async with agent.stream("Weather in Oslo and Rome?") as stream:
        async for event in stream:
            events.append(event)
        result = stream.result()
    kinds = [e.kind for e in events]
    assert kinds[:2] == ["thinking", "thinking"]
    assert kinds.index("text_delta") < kinds.index("tool_call") < kinds.index("tool_result")
    assert kinds[-2:] == ["usage", "done"]
    assert result.text == "Let me check.\n\nBoth sunny."
    assert [(c.name, c.arguments, c.result) for c in result.tool_calls] == [
        ("lookup", {"city": "Oslo"}, {"city": "Oslo", "sky": "sunny"}),
        ("lookup", {"city": "Rome"}, {"city": "Rome", "sky": "sunny"}),
    ]
    assert (
        result.usage.requests,
        result.usage.input_tokens,
        result.usage.output_tokens,
        result.usage.total_tokens,
    ) == (2, 40, 9, 49)
    # What the model saw on its second call: the system prompt, the question, its own turn, both results.
    second_call = model.calls[1][0]
    assert [m.role for m in second_call] == ["system", "user", "assistant", "tool", "tool"]
    assert second_call[2].tool_calls[0].name == "lookup"
    assert second_call[3].content == '{"city":"Oslo","sky":"sunny"}'
    assert [t.name for t in model.calls[0][1]] == ["lookup"]


async def test_tool_calls_of_one_turn_run_concurrently():
    replies = [
        ScriptedReply(tool_calls=tuple(ScriptedCall("lookup", {"city": f"c{i}"}) for i in range(10))),
        ScriptedReply(text="done"),
    ]
    agent, _ = agent_with(*replies)
    running["most"] = 0
    result = await agent.run("many")
    assert running["most"] == 10, "the ten calls of one turn should all be running at once"
    assert len(result.tool_calls) == 10 and all(c.result for c in result.tool_calls)


async def test_a_bad_tool_call_goes_back_to_the_model_as_an_error():
    agent, model = agent_with(
        ScriptedReply(tool_calls=(ScriptedCall("lookup", {"town": "Oslo"}), ScriptedCall("missing", {}))),
        ScriptedReply(text="Sorry."),
    )
    result = await agent.run("x")
    assert [c.error is not None for c in result.tool_calls] == [True, True]
    assert "city: Field required" in result.tool_calls[0].error
    assert "no tool named 'missing'" in result.tool_calls[1].error
    assert model.calls[1][0][-1].content.startswith("error: ")
    assert result.text == "Sorry." and not result.errors


async def test_the_history_of_the_session_reaches_the_model():
    agent, model = agent_with(ScriptedReply(text="Hi Ann."), ScriptedReply(text="You are Ann."))
    first = await agent.run("I am Ann.")
    await agent.run("Who am I?", history=first.messages)
    messages = model.calls[1][0]
    assert [(m.role, m.content) for m in messages] == [
        ("system", "Be brief."),
        ("user", "I am Ann."),
        ("assistant", "Hi Ann."),
        ("user", "Who am I?"),
    ]


async def test_max_turns_stops_a_model_that_keeps_calling_tools():
    loop = [ScriptedReply(tool_calls=(ScriptedCall("lookup", {"city": "Oslo"}),)) for _ in range(3)]
    agent, model = agent_with(*loop, usage_limits=UsageLimits(max_turns=3))
    result = await agent.run("forever")
    assert len(model.calls) == 3
    assert result.errors[0].details == {"limit": "max_turns"} and result.usage.requests == 3


async def test_max_tokens_stops_the_run_after_the_reply_that_crossed_it():
    used = TokenUsage(input_tokens=60, output_tokens=50, total_tokens=110)
    replies = [
        ScriptedReply(tool_calls=(ScriptedCall("lookup", {"city": "Oslo"}),), usage=used),
        ScriptedReply(text="never"),
    ]
    agent, model = agent_with(*replies, usage_limits=UsageLimits(max_tokens=100))
    result = await agent.run("x")
    assert len(model.calls) == 1 and result.errors[0].details == {"limit": "max_tokens"}


async def test_a_provider_failure_becomes_an_error_event_and_the_run_still_ends_well():
    agent, _ = agent_with(
        ScriptedReply(
            text="The answer is",
            failure_after_text=ModelProviderError("The model provider failed while answering.", 502),
        ),
    )
    result = await agent.run("x")
    assert result.text == "The answer is"
    assert [(e.code, e.message) for e in result.errors] == [(502, "The model provider failed while answering.")]
    assert result.messages[-1].events[-1]["event_name"] == "done"


async def test_a_runs_usage_is_the_one_token_usage_type_and_counts_every_request_made():
    from sentient_assist.events import TokenUsage as FrontDoorTokenUsage

    # The provider reports no total (0): it is the input and output added up. The second request fails
    # before any token: it was made all the same, so it counts.
    agent, _ = agent_with(
        ScriptedReply(
            tool_calls=(ScriptedCall("lookup", {"city": "Oslo"}),), usage=TokenUsage(input_tokens=7, output_tokens=3)
        ),
        ScriptedReply(failure=ModelProviderError("The model provider failed while answering.", 502)),
    )
    result = await agent.run("x")
    assert type(result.usage) is TokenUsage and FrontDoorTokenUsage is TokenUsage
    assert result.usage == TokenUsage(requests=2, input_tokens=7, output_tokens=3, total_tokens=10)
    usage_event = next(e for e in result.messages[-1].events if e["event_name"] == "USAGE")
    assert usage_event["content"] == {"requests": 2, "input_tokens": 7, "output_tokens": 3, "total_tokens": 10}


async def test_tool_calls_tool_results_and_usage_keep_their_shape_on_the_wire():
    agent, _ = agent_with(
        ScriptedReply(
            tool_calls=(ScriptedCall("lookup", {"city": "Oslo"}, id="c1"), ScriptedCall("missing", {}, id="c2")),
            usage=TokenUsage(input_tokens=3, output_tokens=2),
        ),
        ScriptedReply(text="ok"),
    )
    result = await agent.run("x")
    events = result.messages[-1].events
    documents = [(e["event_name"], json.dumps(e["content"])) for e in events if e["content_type"] == "atomic.json"]
    no_tool = "there is no tool named 'missing'; the tools are: lookup"
    assert documents == [
        ("TOOL_CALL", '{"id": "c1", "name": "lookup", "arguments": {"city": "Oslo"}}'),
        ("TOOL_CALL", '{"id": "c2", "name": "missing", "arguments": {}}'),
        ("TOOL_RESULT", '{"id": "c1", "name": "lookup", "result": {"city": "Oslo", "sky": "sunny"}, "error": null}'),
        ("TOOL_RESULT", f'{{"id": "c2", "name": "missing", "result": null, "error": "{no_tool}"}}'),
        ("USAGE", '{"requests": 2, "input_tokens": 3, "output_tokens": 2, "total_tokens": 5}'),
    ]
