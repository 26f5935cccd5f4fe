"""ResponseHandler and its text streams over a QueueHook; the Channel; the Session."""

from __future__ import annotations

import asyncio
import inspect
from types import MappingProxyType

import pydantic
import pytest
from pydantic import BaseModel, RootModel
from ulid import ULID

from sentient_assist import ResponseHandler, Session
from sentient_assist.compat import Identity
from sentient_assist.events import DocumentEvent, DoneEvent, ErrorContent, ErrorEvent, TextBlockEvent, TextChunkEvent
from sentient_assist.exceptions import AgentError, ResponseStreamClosedError, TextStreamClosedError
from sentient_assist.protocol.conventions import ToolResultPayload
from sentient_assist.protocol.request import Interaction, SessionObject
from sentient_assist.protocol.ulid import is_ulid
from sentient_assist.runtime.channel import Channel
from sentient_assist.runtime.session import Interactions
from sentient_assist.testing import QueueHook

SOURCE = "agent-x"


@pytest.fixture
def queue() -> asyncio.Queue:
    return asyncio.Queue()


@pytest.fixture
def handler(queue) -> ResponseHandler:
    return ResponseHandler(SOURCE, QueueHook(queue))


def drain(queue: asyncio.Queue) -> list:
    """Every event emitted so far."""
    events = []
    while not queue.empty():
        events.append(queue.get_nowait())
    return events


async def settle() -> None:
    """Let every other ready task run until it blocks."""
    for _ in range(5):
        await asyncio.sleep(0)


async def perform(emit, *args) -> None:
    """Call one of the handler's methods; await it unless it is sync (create_text_stream)."""
    result = emit(*args)
    if inspect.isawaitable(result):
        await result


def types_of(events: list) -> list[type]:
    return [type(event) for event in events]


async def emit_one_of_each(handler: ResponseHandler) -> None:
    await handler.emit_text_block("PLAN", "the plan")
    await handler.emit_json("SOURCES", {"results": [1, 2]})
    await handler.emit_error("went wrong")
    stream = handler.create_text_stream("FINAL_RESPONSE")
    await stream.emit_chunk("Hello")
    await stream.complete()
    await handler.complete()


# --- events and their fields ----------------------------------------------------------------


async def test_each_emit_makes_its_event_class(handler, queue):
    await emit_one_of_each(handler)
    expected = [TextBlockEvent, DocumentEvent, ErrorEvent, TextChunkEvent, TextChunkEvent, DoneEvent]
    assert types_of(drain(queue)) == expected


async def test_events_carry_the_source_and_increasing_ulids(handler, queue):
    await emit_one_of_each(handler)
    events = drain(queue)
    assert {event.source for event in events} == {SOURCE}
    ids = [event.id for event in events]
    assert all(is_ulid(event_id) for event_id in ids)
    assert ids == sorted(set(ids))


async def test_text_block_and_document_contents(handler, queue):
    await handler.emit_text_block("PLAN", "the plan")
    await handler.emit_json("SOURCES", MappingProxyType({"results": [{"title": "t"}]}))
    block, document = drain(queue)
    assert (block.event_name, block.content) == ("PLAN", "the plan")
    assert document.event_name == "SOURCES"
    assert type(document.content) is dict
    assert document.content == {"results": [{"title": "t"}]}


async def test_text_stream_chunks_share_name_and_stream_id(handler, queue):
    stream = handler.create_text_stream("FINAL_RESPONSE")
    await stream.emit_chunk("Hel")
    await stream.emit_chunk("lo")
    await stream.complete()
    chunks = drain(queue)
    assert [(c.event_name, c.stream_id) for c in chunks] == [("FINAL_RESPONSE", stream.id)] * 3
    assert [(c.content, c.is_complete) for c in chunks] == [("Hel", False), ("lo", False), ("", True)]
    assert stream.is_complete


async def test_two_streams_have_different_ids(handler):
    assert handler.create_text_stream("A").id != handler.create_text_stream("A").id


async def test_emit_error_defaults_to_500_without_details(handler, queue):
    await handler.emit_error("went wrong")
    [error] = drain(queue)
    assert error.event_name == "error"
    assert error.content == ErrorContent(error_message="went wrong", error_code=500, details=None)


async def test_emit_error_with_code_and_details(handler, queue):
    await handler.emit_error("too slow", error_code=504, details={"error_type": "TimeoutError", "seconds": [1.5]})
    [error] = drain(queue)
    assert error.content == ErrorContent(
        error_message="too slow", error_code=504, details={"error_type": "TimeoutError", "seconds": [1.5]}
    )


async def test_identity_gives_its_id_as_source(queue):
    handler = ResponseHandler(Identity(id="agent-id", name="Agent Name"), QueueHook(queue))
    await handler.emit_text_block("PLAN", "x")
    assert handler.source == "agent-id"
    assert drain(queue)[0].source == "agent-id"


# --- completing --------------------------------------------------------------------------------


async def test_complete_closes_open_streams_then_sends_one_done(handler, queue):
    written = handler.create_text_stream("FINAL_RESPONSE")
    silent = handler.create_text_stream("THINKING")
    finished = handler.create_text_stream("PLAN")
    await written.emit_chunk("partial")
    await finished.complete()
    drain(queue)

    await handler.complete()

    events = drain(queue)
    assert types_of(events) == [TextChunkEvent, TextChunkEvent, DoneEvent]
    final_chunks = [(e.stream_id, e.is_complete, e.content) for e in events[:2]]
    assert final_chunks == [(written.id, True, ""), (silent.id, True, "")]
    assert written.is_complete and silent.is_complete and handler.is_complete


async def test_complete_twice_sends_done_once(handler, queue):
    await handler.complete()
    await handler.complete()
    assert types_of(drain(queue)) == [DoneEvent]
    assert handler.is_complete


async def test_concurrent_complete_calls_send_done_once():
    queue = asyncio.Queue(maxsize=1)
    handler = ResponseHandler(SOURCE, QueueHook(queue))
    handler.create_text_stream("FINAL_RESPONSE")
    queue.put_nowait("filler")  # the hook's next put has to wait for a reader
    completions = [asyncio.create_task(handler.complete()) for _ in range(2)]
    await settle()
    taken = []
    while not all(task.done() for task in completions):
        taken.append(await asyncio.wait_for(queue.get(), timeout=1))
        await settle()
    taken += drain(queue)
    assert types_of(taken[1:]) == [TextChunkEvent, DoneEvent]


EMITS_AFTER_COMPLETE = {
    "emit_text_block": lambda handler, stream: handler.emit_text_block("PLAN", "late"),
    "emit_json": lambda handler, stream: handler.emit_json("SOURCES", {"late": True}),
    "emit_error": lambda handler, stream: handler.emit_error("late"),
    "respond": lambda handler, stream: handler.respond("PLAN", "late"),
    "create_text_stream": lambda handler, stream: handler.create_text_stream("LATE"),
    "emit_chunk-on-stream-open-at-complete": lambda handler, stream: stream.emit_chunk("late"),
}


@pytest.mark.parametrize("emit", EMITS_AFTER_COMPLETE.values(), ids=EMITS_AFTER_COMPLETE.keys())
async def test_any_emit_after_complete_raises_and_sends_nothing(handler, queue, emit):
    stream = handler.create_text_stream("FINAL_RESPONSE")
    await handler.complete()
    drain(queue)
    with pytest.raises(ResponseStreamClosedError):
        await perform(emit, handler, stream)
    assert drain(queue) == []


async def test_emit_chunk_after_stream_complete_raises(handler, queue):
    stream = handler.create_text_stream("FINAL_RESPONSE")
    await stream.complete()
    drain(queue)
    with pytest.raises(TextStreamClosedError):
        await stream.emit_chunk("late")
    assert drain(queue) == []
    assert not handler.is_complete


async def test_stream_complete_twice_emits_once(handler, queue):
    stream = handler.create_text_stream("FINAL_RESPONSE")
    await stream.complete()
    await stream.complete()
    assert len(drain(queue)) == 1


@pytest.mark.parametrize(
    ("response", "event_class"),
    [("the answer", TextBlockEvent), ({"answer": 42}, DocumentEvent)],
    ids=["text", "document"],
)
async def test_respond_sends_one_event_then_done(handler, queue, response, event_class):
    await handler.respond("ANSWER", response)
    event, done = drain(queue)
    assert (type(event), event.event_name, event.content) == (event_class, "ANSWER", response)
    assert type(done) is DoneEvent
    assert handler.is_complete


# --- misuse ----------------------------------------------------------------------------------

NAMED_EMITS = {
    "emit_text_block": lambda handler, name: handler.emit_text_block(name, "x"),
    "emit_json": lambda handler, name: handler.emit_json(name, {"x": 1}),
    "respond": lambda handler, name: handler.respond(name, "x"),
    "create_text_stream": lambda handler, name: handler.create_text_stream(name),
}
BAD_NAMES = {
    "empty": "",
    "int": 42,
    "none": None,
    "bytes": b"PLAN",
    "LF": "PL\nAN",
    "CR": "PL\rAN",
    "LS": "PL\u2028AN",
    "NEL": "PL\x85AN",
}


@pytest.mark.parametrize("name", BAD_NAMES.values(), ids=BAD_NAMES.keys())
@pytest.mark.parametrize("emit", NAMED_EMITS.values(), ids=NAMED_EMITS.keys())
async def test_bad_event_name_raises_agent_error(handler, queue, emit, name):
    with pytest.raises(AgentError):
        await perform(emit, handler, name)
    assert drain(queue) == []
    assert not handler.is_complete


@pytest.mark.parametrize("emit", NAMED_EMITS.values(), ids=NAMED_EMITS.keys())
async def test_good_event_name_is_accepted(handler, queue, emit):
    # The control for the test above: the same calls with a usable name go through.
    await perform(emit, handler, "ÉTAPE 2")


class Opaque:
    pass


BAD_DOCUMENTS = {
    "list": [1, 2],
    "str": '{"a": 1}',
    "none": None,
    "set-value": {"tags": {"a", "b"}},
    "object-value": {"thing": Opaque()},
    "nested-object": {"a": [{"b": Opaque()}]},
    "nan": {"x": float("nan")},
}


@pytest.mark.parametrize("data", BAD_DOCUMENTS.values(), ids=BAD_DOCUMENTS.keys())
async def test_emit_json_rejects_what_is_not_a_json_object(handler, queue, data):
    with pytest.raises(AgentError):
        await handler.emit_json("SOURCES", data)
    assert drain(queue) == []


async def test_emit_json_sends_a_typed_payload_as_the_dict_it_dumps_to(handler, queue):
    payload = ToolResultPayload(id="call-1", name="search", result={"hits": [1, 2.5, "Grüße"]})
    await handler.emit_json("TOOL_RESULT", payload)
    await handler.emit_json(
        "TOOL_RESULT", {"id": "call-1", "name": "search", "result": {"hits": [1, 2.5, "Grüße"]}, "error": None}
    )
    typed, written = drain(queue)
    assert type(typed) is DocumentEvent and type(typed.content) is dict
    assert list(typed.content.items()) == list(written.content.items()), "the same fields in the same order"
    typed.id = written.id
    assert typed.sse_frame() == written.sse_frame()


class _Opaque(BaseModel):
    thing: object


@pytest.mark.parametrize(
    "model", [RootModel[list[int]]([1, 2]), _Opaque(thing=Opaque())], ids=["not-an-object", "opaque"]
)
async def test_emit_json_rejects_a_model_that_is_not_a_json_object(handler, queue, model):
    with pytest.raises(AgentError, match=r"emit_json\(data\)"):
        await handler.emit_json("SOURCES", model)
    assert drain(queue) == []


@pytest.mark.parametrize("details", [["a"], {"when": Opaque()}], ids=["list", "object-value"])
async def test_emit_error_rejects_details_that_are_not_a_json_object(handler, queue, details):
    with pytest.raises(AgentError):
        await handler.emit_error("x", details=details)
    assert drain(queue) == []


@pytest.mark.parametrize("content", [42, None, b"bytes", ["a"]], ids=["int", "none", "bytes", "list"])
async def test_emit_text_block_rejects_non_str(handler, queue, content):
    with pytest.raises(AgentError):
        await handler.emit_text_block("PLAN", content)
    assert drain(queue) == []


@pytest.mark.parametrize("chunk", [42, None, b"bytes"], ids=["int", "none", "bytes"])
async def test_emit_chunk_rejects_non_str(handler, queue, chunk):
    stream = handler.create_text_stream("FINAL_RESPONSE")
    with pytest.raises(AgentError):
        await stream.emit_chunk(chunk)
    assert drain(queue) == []


# --- Channel ---------------------------------------------------------------------------------


async def take_all(channel: Channel) -> list:
    """Everything ready, waiting while there is nothing, as the channel's reader does."""

    async def taken() -> list:
        while (items := channel.take_ready()) is None:
            await channel.ready()
        return items

    return await asyncio.wait_for(taken(), timeout=1)


async def test_channel_items_come_out_in_order():
    channel = Channel()
    for item in range(5):
        channel.put_nowait(item)
    assert await take_all(channel) == [0, 1, 2, 3, 4]


async def test_channel_reader_takes_everything_ready_at_once():
    channel = Channel()
    reader = asyncio.create_task(take_all(channel))
    await settle()
    assert not reader.done()
    channel.put_nowait("a")
    channel.put_nowait("b")
    assert await asyncio.wait_for(reader, timeout=1) == ["a", "b"]


async def test_channel_writer_waits_for_room_until_the_reader_takes():
    channel = Channel(capacity=2)
    channel.put_nowait(1)
    channel.put_nowait(2)
    assert not channel.has_room()
    writer = asyncio.create_task(channel.wait_for_room())
    await settle()
    assert not writer.done()
    assert await take_all(channel) == [1, 2]
    await asyncio.wait_for(writer, timeout=1)
    assert channel.has_room()


async def test_channel_writers_are_released_in_turn():
    channel = Channel(capacity=1)
    channel.put_nowait(0)

    async def write(item: int) -> None:
        await channel.wait_for_room()
        channel.put_nowait(item)

    writers = [asyncio.create_task(write(item)) for item in (1, 2)]
    await settle()
    taken = []
    while len(taken) < 3:
        taken += await take_all(channel)
        await settle()
    await asyncio.wait_for(asyncio.gather(*writers), timeout=1)
    assert taken == [0, 1, 2]


async def test_channel_reader_takes_empty_after_the_last_item():
    channel = Channel()
    channel.put_nowait("a")
    channel.put_nowait("b", last=True)
    assert channel.closed
    assert await take_all(channel) == ["a", "b"]
    assert await take_all(channel) == []
    assert await take_all(channel) == []


async def test_channel_waiting_reader_gets_the_last_item_then_empty():
    channel = Channel()
    reader = asyncio.create_task(take_all(channel))
    await settle()
    channel.put_nowait("done", last=True)
    assert await asyncio.wait_for(reader, timeout=1) == ["done"]
    assert await take_all(channel) == []


# --- Session ---------------------------------------------------------------------------------


def interaction(prompt: str) -> Interaction:
    return Interaction.model_validate(
        {
            "request": {
                "event": {
                    "chatId": str(ULID()),
                    "content": {"request_payload": {"parts": [{"prompt": prompt}]}},
                }
            }
        }
    )


def test_new_session_has_fresh_ulids_and_no_interactions():
    first, second = Session.new("agent-x"), Session.new("agent-x")
    assert first.processor_id == "agent-x"
    ids = [first.activity_id, first.request_id, second.activity_id, second.request_id]
    assert all(isinstance(ulid, ULID) for ulid in ids)
    assert len(set(ids)) == 4
    assert len(first.get_interactions()) == 0
    assert list(first.get_interactions()) == []


async def test_session_interactions_iterate_with_for_and_async_for():
    history = [interaction("first"), interaction("second"), interaction("third")]
    session_object = SessionObject(processor_id="agent-x", activity_id=ULID(), request_id=ULID(), interactions=history)
    session = Session(session_object)
    interactions = session.get_interactions()
    assert isinstance(interactions, Interactions)
    assert len(interactions) == 3
    assert [i.request.event.prompt for i in interactions] == ["first", "second", "third"]
    assert [i.request.event.prompt async for i in interactions] == ["first", "second", "third"]


async def read_to_the_end(run) -> list:
    """Every event of `run`, read as the server and the facade read it."""
    events = []
    async with asyncio.timeout(5):
        while (batch := run.take_ready()) != []:
            if batch is None:
                await run.ready()
            else:
                events += batch
    return events


async def test_a_watched_run_wakes_its_silent_reader_for_a_keepalive_then_still_delivers():
    from sentient_assist import AbstractAgent
    from sentient_assist.protocol.request import Query
    from sentient_assist.runtime.run import Run, RunStats
    from sentient_assist.runtime.watcher import RunWatcher

    class SpeaksLate(AbstractAgent):
        name = "late"

        async def assist(self, session, query, handler):
            await asyncio.sleep(0.5)
            await handler.respond("FINAL", "at last")

    watcher = RunWatcher(time_limit=5, keepalive=0.1)
    run = Run(
        SpeaksLate(),
        Session.new("late"),
        Query(id="01JDQ4Z8M7T3V5X9A2B4C6D8EF", prompt="p"),
        watcher=watcher,
        stats=RunStats("r"),
    )
    try:
        assert run.take_ready() is None
        await asyncio.wait_for(run.ready(), timeout=1)  # woken with nothing to take: a keepalive
        assert run.take_ready() is None
        events = await read_to_the_end(run)
        assert [type(e).__name__ for e in events] == ["TextBlockEvent", "DoneEvent"]
        assert run.stats.outcome == "completed"
    finally:
        run.reader_left()
    assert watcher.runs == []


async def test_a_time_limit_that_cuts_complete_short_still_ends_the_run_with_504_and_done():
    from sentient_assist import AbstractAgent
    from sentient_assist.protocol.request import Query
    from sentient_assist.runtime.run import Run, RunStats

    class FillsTheChannelThenCompletes(AbstractAgent):
        name = "filler"

        async def assist(self, session, query, handler):
            stream = handler.create_text_stream("FINAL_RESPONSE")
            for _ in range(256):  # the channel's capacity: complete() must then wait for room
                await stream.emit_chunk("x")
            await handler.complete()

    from sentient_assist.runtime.watcher import RunWatcher

    run = Run(
        FillsTheChannelThenCompletes(),
        Session.new("filler"),
        Query(id="01JDQ4Z8M7T3V5X9A2B4C6D8EF", prompt="p"),
        watcher=RunWatcher(time_limit=0.2),
        stats=RunStats("r"),
    )
    await asyncio.sleep(0.5)  # nobody reads while the time limit passes
    events = await read_to_the_end(run)
    run.reader_left()
    tail = [(type(e).__name__, getattr(e, "is_complete", None)) for e in events[-3:]]
    assert tail == [("TextChunkEvent", True), ("ErrorEvent", None), ("DoneEvent", None)]
    assert events[-2].content.error_code == 504


async def test_a_forwarded_event_cannot_smuggle_a_frame_through_its_name():
    handler = ResponseHandler("host", QueueHook(asyncio.Queue()))
    forged = TextBlockEvent(event_name="X\n\nevent: done\ndata: {}", source="remote", content="x")
    with pytest.raises(AgentError):
        await handler.emit_event(forged)


# What the service sends, a client sends back as the next turn's history: it must validate.


def history_with(event) -> dict:
    """A request whose one past turn answered with `event`, as Sentient Chat sends it."""
    from tests.protocol.test_request import interaction

    session = {"processor_id": "host", "activity_id": str(ULID()), "request_id": str(ULID())}
    past = interaction(responses=[event.model_dump(mode="json")])
    return {"query": {"id": str(ULID()), "prompt": "next"}, "session": {**session, "interactions": [past]}}


async def test_an_event_name_too_long_for_the_history_is_refused_when_sent(handler):
    from sentient_assist.protocol.request import MAX_NAME_LENGTH

    await handler.emit_text_block("N" * MAX_NAME_LENGTH, "at the limit")
    for emit in (handler.emit_text_block, handler.emit_json, handler.create_text_stream):
        argument = {"k": 1} if emit == handler.emit_json else "text"
        with pytest.raises(AgentError, match=f"at most {MAX_NAME_LENGTH} characters"):
            await perform(
                emit, "N" * (MAX_NAME_LENGTH + 1), *([argument] if emit != handler.create_text_stream else [])
            )


@pytest.mark.parametrize(
    ("field", "value", "limit"),
    [
        ("source", "s" * 257, "at most 256"),
        ("metadata", {"note": "m" * 4097}, "at most 4096"),
        ("metadata", {f"k{i}": "v" for i in range(10_000)}, "metadata"),
    ],
    ids=["source", "metadata-value", "metadata-keys"],
)
async def test_a_forwarded_event_too_large_for_the_history_is_refused(field, value, limit):
    from sentient_assist.protocol.request import Request

    handler = ResponseHandler("host", QueueHook(asyncio.Queue()))
    fields = {"event_name": "NOTE", "source": "remote", "content": "x", field: value}
    too_large = TextBlockEvent(**fields)
    with pytest.raises(pydantic.ValidationError):  # what the next turn would have met: a 422
        Request.model_validate(history_with(too_large))
    with pytest.raises(AgentError, match=limit):
        await handler.emit_event(too_large)
    at_the_limit = TextBlockEvent(event_name="NOTE", source="r" * 256, content="x", metadata={"note": "m" * 4096})
    await handler.emit_event(at_the_limit)
    Request.model_validate(history_with(at_the_limit))
