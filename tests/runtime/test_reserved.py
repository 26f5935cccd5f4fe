"""The guarantees a response keeps about reserved events, where they are made: a STAGE carries
labels and integer counts, never contents; every TOOL_CALL gets exactly one TOOL_RESULT."""

from __future__ import annotations

import asyncio

import pytest

from sentient_assist import ResponseHandler
from sentient_assist.events import DocumentEvent, DoneEvent
from sentient_assist.exceptions import AgentError
from sentient_assist.runtime.reserved import MAX_STAGE_LABEL, NO_RESULT
from sentient_assist.testing import QueueHook

SOURCE = "agent-x"


def drained(queue: asyncio.Queue) -> list:
    events = []
    while not queue.empty():
        events.append(queue.get_nowait())
    return events


async def test_emit_stage_sends_labels_and_counts():
    queue: asyncio.Queue = asyncio.Queue()
    handler = ResponseHandler(SOURCE, QueueHook(queue))
    await handler.emit_stage("search", "end", "ok", capability="web", counts={"hits": 3})
    (event,) = drained(queue)
    assert isinstance(event, DocumentEvent) and event.event_name == "STAGE"
    assert event.content == {
        "stage": "search",
        "phase": "end",
        "capability": "web",
        "outcome": "ok",
        "reason": None,
        "counts": {"hits": 3},
    }


STAGE = {"stage": "search", "phase": "end", "capability": None, "outcome": "ok", "reason": None, "counts": {}}


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"counts": {"hits": "three results about the user's illness"}}, "counts.hits"),
        ({"counts": {"hits": 2.5}}, "counts.hits"),
        ({"counts": {"hits": True}}, "counts.hits"),
        ({"counts": {"hits": "3"}}, "counts.hits"),
        ({"query": "what the user typed"}, "query"),
        ({"reason": "line one\nline two"}, "reason"),
        ({"outcome": "x" * (MAX_STAGE_LABEL + 1)}, "outcome"),
        ({"stage": 7}, "stage"),
    ],
)
async def test_a_stage_that_could_hold_contents_is_refused_naming_the_field_and_nothing_is_sent(change, named):
    queue: asyncio.Queue = asyncio.Queue()
    handler = ResponseHandler(SOURCE, QueueHook(queue))
    with pytest.raises(AgentError) as caught:
        await handler.emit_json("STAGE", {**STAGE, **change})
    assert f"STAGE {named}" in str(caught.value) and "never contents" in str(caught.value)
    assert drained(queue) == []


async def test_every_open_tool_call_is_answered_before_done_and_only_those():
    queue: asyncio.Queue = asyncio.Queue()
    handler = ResponseHandler(SOURCE, QueueHook(queue))
    await handler.emit_json("TOOL_CALL", {"id": "a", "name": "search", "arguments": {}})
    await handler.emit_json("TOOL_CALL", {"id": "b", "name": "fetch", "arguments": {"url": "x"}})
    await handler.emit_json("TOOL_CALL", {"id": "c"})  # not the convention's shape: not a call to answer
    await handler.emit_json("TOOL_RESULT", {"id": "a", "name": "search", "result": [1], "error": None})
    await handler.emit_json("TOOL_RESULT", {"id": ["not", "an", "id"], "name": "x", "result": None, "error": None})
    await handler.complete()
    *_, answer, done = drained(queue)
    assert answer.event_name == "TOOL_RESULT"
    assert answer.content == {"id": "b", "name": "fetch", "result": None, "error": NO_RESULT}
    assert isinstance(done, DoneEvent)


async def test_the_calls_left_open_are_answered_when_the_response_is_ended_for_the_agent_too():
    queue: asyncio.Queue = asyncio.Queue()
    handler = ResponseHandler(SOURCE, QueueHook(queue))
    stream = handler.create_text_stream("FINAL_RESPONSE")
    await stream.emit_chunk("partial")
    await handler.emit_json("TOOL_CALL", {"id": "a", "name": "search", "arguments": {}})
    drained(queue)
    closing = handler.close_now()  # the time limit, a disconnect, shutdown
    assert [(e.event_name, getattr(e, "content", None)) for e in closing][1:] == [
        ("TOOL_RESULT", {"id": "a", "name": "search", "result": None, "error": NO_RESULT}),
        ("done", None),
    ]
