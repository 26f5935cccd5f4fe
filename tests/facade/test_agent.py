"""Agent.run()/stream(): the same typed results in-process and over HTTP."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from sentient_assist import Agent, AgentResult
from sentient_assist.exceptions import RemoteAgentError
from sentient_assist.facade import ToolCall
from sentient_assist.registry import load_agent
from sentient_assist.runtime.reserved import NO_RESULT
from tests.support.agents import ScriptedAgent
from tests.support.waiting import wait_until

PROCESSOR = "facade-test"


def without_ids(result: AgentResult) -> dict[str, Any]:
    """The result as data, with what differs between any two runs taken out: ids."""
    data = result.model_dump(mode="json")
    for message in data["messages"]:
        for event in message["events"]:
            event.pop("id")
            event.pop("stream_id", None)
            details = (event.get("content") or {}).get("details") if event["content_type"] == "atomic.error" else None
            if details:
                details.pop("request_id", None)
    for error in data["errors"]:
        (error["details"] or {}).pop("request_id", None)
    return data


@pytest.fixture(scope="module")
def both_scripted(request):
    scripted_server = request.getfixturevalue("scripted_server")
    return (
        Agent(ScriptedAgent(), processor_id=PROCESSOR),
        Agent(scripted_server.url + "/assist", processor_id=PROCESSOR),
    )


@pytest.fixture(scope="module")
def both_showcase(request):
    showcase_server = request.getfixturevalue("showcase_server")
    return (
        Agent(load_agent("showcase"), processor_id=PROCESSOR),
        Agent(showcase_server.url + "/assist", processor_id=PROCESSOR),
    )


@pytest.mark.parametrize("prompt", ["What is up?", "error"])
async def test_showcase_gives_equal_results_in_process_and_over_http(both_showcase, prompt):
    local, remote = both_showcase
    assert without_ids(await local.run(prompt)) == without_ids(await remote.run(prompt))


@pytest.mark.parametrize(
    "prompt", ["conventions", "raise", "no-complete", "every-event", "unanswered-call", "unanswered-call:raise"]
)
async def test_scripted_agents_give_equal_results_in_process_and_over_http(both_scripted, prompt):
    local, remote = both_scripted
    assert without_ids(await local.run(prompt)) == without_ids(await remote.run(prompt))


async def test_every_reserved_event_name_is_read_into_typed_values(both_scripted):
    local, remote = both_scripted
    for agent in (local, remote):
        events = []
        async with agent.stream("conventions") as stream:
            async for event in stream:
                events.append(event)
            result = stream.result()
        assert [e.index for e in events] == list(range(len(events)))
        kinds = [e.kind for e in events]
        assert kinds == [
            "thinking",
            "thinking",
            "stage",
            "tool_call",
            "tool_call",
            "tool_result",
            "tool_result",
            "stage",
            "usage",
            "usage",
            "handoff",
            "document",
            "document",
            "text_block",
            "text",
            "error",
            "text_delta",
            "text_delta",
            "text_delta",
            "ask_user",
            "done",
        ]
        assert events[11].event_name == "TOOL_CALL" and events[11].data == {"id": "bad"}
        assert result.text == "It is sunny."
        assert [(c.id, c.name, c.arguments, c.result, c.error) for c in result.tool_calls] == [
            ("call-1", "search", {"q": "weather"}, {"hits": 3}, None),
            ("call-2", "fetch", {"url": "x"}, None, "timed out"),
        ]
        assert (
            result.usage.requests,
            result.usage.input_tokens,
            result.usage.output_tokens,
            result.usage.total_tokens,
        ) == (2, 17, 5, 22)
        assert [(s.stage, s.phase, s.outcome, s.counts) for s in result.stages] == [
            ("search", "start", "running", {}),
            ("search", "end", "ok", {"hits": 3}),
        ]
        assert [(e.message, e.code) for e in result.errors] == [("one source failed", 502)]
        assert (
            result.interrupt is not None and result.interrupt.question == "Which city?" and result.interrupt.resumable
        )
        assert not result.cancelled
        # Each kind's typed field, and nothing in `data` but for documents.
        by_kind = {e.kind: e for e in events}
        assert by_kind["thinking"].text == "look it up." and by_kind["text_delta"].text == "sunny."
        first_call, first_result = events[3], events[5]
        assert first_call.tool_call == ToolCall(id="call-1", name="search", arguments={"q": "weather"})
        assert first_result.tool_call == ToolCall(
            id="call-1", name="search", arguments={"q": "weather"}, result={"hits": 3}
        )
        assert events[6].tool_call is not None and events[6].tool_call.error == "timed out"
        assert events[7].stage is not None and events[7].stage.counts == {"hits": 3}
        assert by_kind["usage"].usage is not None and by_kind["usage"].usage.input_tokens == 7
        assert by_kind["handoff"].handoff is not None and by_kind["handoff"].handoff.to_agent == "weather"
        asked = by_kind["ask_user"].interrupt
        assert asked is not None and (asked.kind, asked.choices, asked.token) == (
            "ask_user",
            ("Oslo", "Lima"),
            "resume-1",
        )
        error = by_kind["error"].error
        assert error is not None and (error.message, error.code, error.details) == (
            "one source failed",
            502,
            {"source": "fetch"},
        )
        assert by_kind["done"].result == result
        assert by_kind["document"].data == {"results": [1, 2]}
        assert all(e.data is None for e in events if e.kind != "document")


async def test_an_interrupt_names_the_tool_call_to_approve(both_scripted):
    for agent in both_scripted:
        async with agent.stream("interrupt") as stream:
            events = [event async for event in stream]
        interrupt_event, done = events
        pending = interrupt_event.interrupt
        assert interrupt_event.kind == "interrupt" and pending is not None
        assert (pending.kind, pending.reason, pending.question, pending.token, pending.resumable) == (
            "interrupt",
            "approval",
            "Send it?",
            "t-7",
            True,
        )
        assert pending.tool_call == ToolCall(id="call-7", name="send_email", arguments={"to": "ana@example.com"})
        assert done.result is not None and done.result.interrupt == pending


async def test_the_answer_text_is_final_response_else_text_blocks_else_empty(both_scripted):
    local, _ = both_scripted
    result = await local.run("raise")
    assert result.text == "partial "  # the chunk sent before it raised
    assert [e.code for e in result.errors] == [500]
    only_a_document = await local.run("session")
    assert only_a_document.text == ""
    only_a_text_block = await local.run("after-complete:/dev/null")
    assert only_a_text_block.text == "done already"  # no FINAL_RESPONSE: the text blocks are the answer


@pytest.mark.parametrize("where", ["local", "remote"])
async def test_two_turns_with_history_give_the_agent_the_first_turn(both_scripted, where):
    agent = dict(zip(("local", "remote"), both_scripted, strict=False))[where]
    first = await agent.run("session")
    assert first.messages[0].content == "session" and first.messages[1].role == "assistant"
    second = await agent.run("session", history=first.messages)
    seen = second.messages[-1].events[0]["content"]
    assert seen["interactions"] == 1 and seen["prompts"] == ["session"]
    third = await agent.run("session", history=second.messages)
    assert third.messages[-1].events[0]["content"]["interactions"] == 2
    assert len(third.messages) == 6


async def test_history_written_by_hand_is_accepted(both_scripted):
    local, _ = both_scripted
    history = [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi there"}]
    result = await local.run("session", history=history)
    assert result.messages[-1].events[0]["content"]["prompts"] == ["hello"]
    with pytest.raises(ValueError, match=r"history\[0\]"):
        await local.run("session", history=[{"role": "assistant", "content": "first?"}])


@pytest.mark.parametrize("where", ["local", "remote"])
async def test_cancel_stops_the_agent_and_ends_with_cancelled(both_scripted, where, tmp_path):
    agent = dict(zip(("local", "remote"), both_scripted, strict=False))[where]
    marker = tmp_path / "cancelled"
    kinds = []
    async with agent.stream(f"hang:{marker}") as stream:
        async for event in stream:
            kinds.append(event.kind)
            if event.kind == "text_delta":
                stream.cancel()
        assert stream.result().cancelled
    assert kinds == ["text_delta", "cancelled"]
    assert await asyncio.to_thread(wait_until, marker.exists, 3.0)


@pytest.mark.parametrize("where", ["local", "remote"])
async def test_leaving_early_or_cancelling_the_reader_stops_the_agent(both_scripted, where, tmp_path):
    agent = dict(zip(("local", "remote"), both_scripted, strict=False))[where]
    left = tmp_path / "left"
    async with agent.stream(f"hang:{left}") as stream:
        async for _ in stream:
            break
    assert await asyncio.to_thread(wait_until, left.exists, 3.0)

    reader_cancelled = tmp_path / "reader-cancelled"

    async def read_all() -> None:
        async with agent.stream(f"hang:{reader_cancelled}") as stream:
            async for _ in stream:
                pass

    task = asyncio.create_task(read_all())
    await asyncio.sleep(0.5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await asyncio.to_thread(wait_until, reader_cancelled.exists, 3.0)


async def test_a_refused_remote_run_raises_with_the_status(request):
    guarded = request.getfixturevalue("scripted_server")
    with pytest.raises(RemoteAgentError) as refused:
        await Agent(guarded.url + "/nowhere").run("x")
    assert refused.value.status_code == 404
    with pytest.raises(RemoteAgentError):
        await Agent("http://127.0.0.1:9/assist").run("x")


def test_run_sync_for_scripts():
    result = Agent(load_agent("showcase")).run_sync("hi")
    assert "hi" in result.text


@pytest.mark.parametrize("prompt", ["unanswered-call", "unanswered-call:raise"])
async def test_a_tool_call_left_open_is_answered_with_an_error_so_one_of_result_or_error_is_set(both_scripted, prompt):
    for agent in both_scripted:
        result = await agent.run(prompt)
        answered, unanswered = result.tool_calls
        assert (answered.id, answered.result, answered.error) == ("call-1", None, None)  # None is its result
        assert (unanswered.id, unanswered.result, unanswered.error) == ("call-2", None, NO_RESULT)
        names = [event["event_name"] for event in result.messages[-1].events]
        assert names[-2:] == ["TOOL_RESULT", "done"]  # sent by the service, before done
        assert bool(result.errors) == (prompt == "unanswered-call:raise")
