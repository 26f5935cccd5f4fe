"""The SSE frame of every event type: its exact bytes, and that the 0.3.0 models read it."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from sentient_assist import ResponseHandler
from sentient_assist.events import AtomicEvent, BaseEvent, BaseEventType, Event, EventContentType, StreamEvent
from sentient_assist.protocol.events import (
    DocumentEvent,
    DoneEvent,
    ErrorContent,
    ErrorEvent,
    ResponseEventAdapter,
    TextBlockEvent,
    TextChunkEvent,
    parse_event,
)

# The 0.3.0 package's own event models: what the official client parses our frames with.
ReferenceAdapter = pytest.importorskip("sentient_agent_framework.interface.events").ResponseEventAdapter

EVENT_ID = "01JDQ4Z8M7T3V5X9A2B4C6D8EF"
SOURCE = "agent-x"
LINE_BREAKS = ["\x85", "\u2028", "\u2029"]
HEAD_FIELDS = ["content_type", "event_name", "schema_version", "id", "source", "metadata"]
OWN_FIELDS = {
    TextBlockEvent: ["content"],
    DocumentEvent: ["content"],
    TextChunkEvent: ["stream_id", "is_complete", "content"],
    ErrorEvent: ["content"],
    DoneEvent: [],
}
EXAMPLES = settings(max_examples=200, deadline=None, database=None)


# --- building events -----------------------------------------------------------------


def text_block(content: str = "text", *, event_name: str = "PLAN", **fields) -> TextBlockEvent:
    return TextBlockEvent(event_name=event_name, id=EVENT_ID, source=SOURCE, content=content, **fields)


def document(content: dict, **fields) -> DocumentEvent:
    return DocumentEvent(event_name="SOURCES", id=EVENT_ID, source=SOURCE, content=content, **fields)


def chunk(content: str = "chunk", *, is_complete: bool = False, stream_id: str = "5f3a9c0e11", **fields):
    return TextChunkEvent(
        event_name="FINAL_RESPONSE",
        id=EVENT_ID,
        source=SOURCE,
        stream_id=stream_id,
        is_complete=is_complete,
        content=content,
        **fields,
    )


def error(message: str = "it failed", **content) -> ErrorEvent:
    return ErrorEvent(id=EVENT_ID, source=SOURCE, content=ErrorContent(error_message=message, **content))


def done(**fields) -> DoneEvent:
    return DoneEvent(id=EVENT_ID, source=SOURCE, **fields)


NESTED_DOCUMENT = {
    "results": [
        {"title": "Grüße", "url": "https://example.com/a?b=c&d=é", "score": 0.75, "rank": 1},
        {"title": "", "tags": [], "extra": None, "ok": True, "big": 2**70, "neg": -3.5e100},
    ],
    "empty": {},
    "deep": {"a": {"b": {"c": [[], [{}], ["x", 1, False]]}}},
    'quote " and \\ backslash': "tab\tnew\nline\rcarriage\x00nul\x1f\x7f",
}
FULL_METADATA = {"str": "v", "int": 7, "float": 2.5, "bool": True, "list": ["a", "ü"]}

ORDINARY_EVENTS = {
    "textblock": text_block("What the agent plans to do."),
    "textblock-non-ascii": text_block("Grüße, 世界 🎉 — ça va?", event_name="ÉTAPE"),
    "textblock-empty": text_block(""),
    "textblock-controls": text_block('line\nbreak\ttab "quoted" \\ \x00\x1f\x7f'),
    "textblock-metadata": text_block("with metadata", metadata=FULL_METADATA),
    "document": document(NESTED_DOCUMENT),
    "document-empty": document({}),
    "document-metadata": document({"k": "v"}, metadata={f"key{n}": n for n in range(16)}),
    "chunk": chunk("ünïcödé "),
    "chunk-empty": chunk(""),
    "chunk-final": chunk("", is_complete=True),
    "chunk-metadata": chunk("x", metadata={"lang": "fr"}),
    "error-defaults": error(),
    "error-details": error("Zeitüberschreitung", error_code=504, details={"error_type": "Timeout", "n": [1, 2.5]}),
    "error-empty-message": error("", error_code=0, details={}),
    "done": done(),
    "done-metadata": done(metadata={"turn": 3, "final": True}),
}
ordinary_events = pytest.mark.parametrize("event", ORDINARY_EVENTS.values(), ids=ORDINARY_EVENTS.keys())


# --- reading frames --------------------------------------------------------------------


def frame_data(frame: bytes) -> str:
    """The `data:` line of a frame, after checking the frame is exactly event, data, blank line."""
    lines = frame.decode().splitlines()
    assert len(lines) == 3, lines
    event_line, data_line, blank = lines
    assert event_line.startswith("event: ")
    assert data_line.startswith("data: ")
    assert blank == ""
    assert frame.endswith(b"\n\n")
    return data_line.removeprefix("data: ")


def pydantic_frame(event, *, escape: bool = False) -> bytes:
    """The frame with pydantic's JSON; `escape` applies the one intended difference."""
    data = ResponseEventAdapter.dump_json(event).decode()
    if escape:
        for char in LINE_BREAKS:
            data = data.replace(char, f"\\u{ord(char):04x}")
    return ("event: " + event.event_name + "\ndata: " + data + "\n\n").encode()


def in_order(data: str):
    """The JSON with every object as a list of (key, value) pairs: equality then checks key order."""
    return json.loads(data, object_pairs_hook=list)


def reference_fields(reference) -> dict:
    """A reference (0.3.0) event's field values, shaped like `dataclasses.asdict` of ours."""
    fields = {
        "content_type": reference.content_type.value,
        "event_name": reference.event_name,
        "schema_version": reference.schema_version,
        "id": str(reference.id),
        "source": reference.source,
        "metadata": None if reference.metadata is None else dict(reference.metadata),
    }
    if hasattr(reference, "stream_id"):
        fields.update(stream_id=reference.stream_id, is_complete=reference.is_complete)
    if hasattr(reference, "content"):
        content = reference.content
        if hasattr(content, "error_message"):
            details = None if content.details is None else dict(content.details)
            content = {"error_message": content.error_message, "error_code": content.error_code, "details": details}
        elif not isinstance(content, str):
            content = dict(content)
        fields["content"] = content
    return fields


def assert_reference_reads(event, data: str) -> None:
    reference = ReferenceAdapter.validate_json(data)
    assert reference_fields(reference) == dataclasses.asdict(event)
    assert in_order(reference.model_dump_json()) == in_order(data)


def assert_round_trips(event) -> None:
    data = frame_data(event.sse_frame())
    assert parse_event(data) == event
    assert parse_event(json.loads(data)) == event
    assert_reference_reads(event, data)


# --- ordinary content: exactly pydantic's JSON -------------------------------------------


@ordinary_events
def test_frame_is_event_line_then_pydantic_json(event):
    assert event.sse_frame() == pydantic_frame(event)


def test_frame_keeps_non_ascii_as_utf8():
    text = "Grüße, 世界 🎉"
    frame = text_block(text).sse_frame()
    assert text.encode() in frame
    assert b"\\u" not in frame


@ordinary_events
def test_frame_round_trips_and_reference_models_read_it(event):
    assert_round_trips(event)


@ordinary_events
def test_fields_come_in_protocol_order(event):
    data = json.loads(frame_data(event.sse_frame()))
    assert list(data) == HEAD_FIELDS + OWN_FIELDS[type(event)]
    assert data["schema_version"] == "1.0"
    if isinstance(event, ErrorEvent):
        assert list(data["content"]) == ["error_message", "error_code", "details"]


def test_error_content_defaults_are_written():
    data = json.loads(frame_data(error("x").sse_frame()))
    assert data["event_name"] == "error"
    assert data["content"] == {"error_message": "x", "error_code": 500, "details": None}


def test_the_closing_chunk_of_a_stream_is_empty_complete_and_of_the_same_stream():
    first = chunk("Hello", metadata={"lang": "en"})
    closing = first.closing_chunk()
    assert closing == TextChunkEvent.closing("FINAL_RESPONSE", SOURCE, "5f3a9c0e11")
    assert (closing.event_name, closing.source, closing.stream_id) == (first.event_name, first.source, first.stream_id)
    assert (closing.is_complete, closing.content, closing.id, closing.metadata) == (True, "", None, None)
    closing.id = EVENT_ID
    assert closing.sse_frame() == chunk("", is_complete=True).sse_frame()


def test_done_has_no_own_fields():
    data = json.loads(frame_data(done().sse_frame()))
    assert data == {
        "content_type": "atomic.done",
        "event_name": "done",
        "schema_version": "1.0",
        "id": EVENT_ID,
        "source": SOURCE,
        "metadata": None,
    }


# --- line breaks that JSON keeps raw and Python splits on -------------------------------


def events_carrying(text: str) -> dict[str, object]:
    """Every place a string can sit in an event, each holding `text`."""
    return {
        "textblock-content": text_block(text),
        "source": TextBlockEvent(event_name="PLAN", id=EVENT_ID, source=text, content="x"),
        "metadata-value": text_block("x", metadata={"k": text, "l": [text]}),
        "metadata-key": done(metadata={text: 1}),
        "document-value": document({"a": [{"b": text}]}),
        "document-key": document({text: text}),
        "chunk-content": chunk(text),
        "chunk-stream-id": chunk("x", stream_id=text),
        "error-message": error(text),
        "error-details": error("x", details={text: [text]}),
    }


def strings_in(value) -> set[str]:
    """Every string in a JSON value, keys included."""
    if isinstance(value, str):
        return {value}
    if isinstance(value, dict):
        return set(value).union(*map(strings_in, value.values()))
    if isinstance(value, list):
        return set().union(*map(strings_in, value))
    return set()


def assert_escaped_frame(event, text: str, char: str) -> None:
    frame = event.sse_frame()
    assert char not in frame.decode()
    assert (f"\\u{ord(char):04x}").encode() in frame
    assert frame == pydantic_frame(event, escape=True)
    assert text in strings_in(json.loads(frame_data(frame)))
    assert_round_trips(event)


@pytest.mark.parametrize("char", LINE_BREAKS, ids=["NEL", "LS", "PS"])
@pytest.mark.parametrize("place", list(events_carrying("")))
def test_line_break_characters_are_escaped(place, char):
    text = f"before{char}after{char}"
    event = events_carrying(text)[place]
    assert_escaped_frame(event, text, char)


# --- properties: any text, any JSON document -----------------------------------------------

TEXT_EVENTS: dict[str, Callable[[str], object]] = {
    "textblock": text_block,
    "chunk": chunk,
    "error-message": error,
    "metadata": lambda text: done(metadata={"k": text}),
}
# Any text UTF-8 can carry, with the characters a frame must take care of made frequent.
texts = st.text(st.characters(codec="utf-8") | st.sampled_from([*LINE_BREAKS, "\n", "\r", "\x00", '"', "\\"]))
finite_floats = st.floats(allow_nan=False, allow_infinity=False)


@pytest.mark.parametrize("build", TEXT_EVENTS.values(), ids=TEXT_EVENTS.keys())
@EXAMPLES
@given(text=texts)
def test_any_text_frames_as_pydantic_json_and_round_trips(build, text):
    event = build(text)
    assert event.sse_frame() == pydantic_frame(event, escape=True)
    assert_round_trips(event)


def json_values(floats):
    scalars = st.none() | st.booleans() | st.integers() | floats | texts
    return st.recursive(
        scalars,
        lambda children: st.lists(children, max_size=4) | st.dictionaries(texts, children, max_size=4),
        max_leaves=12,
    )


def json_documents(floats=finite_floats):
    return st.dictionaries(texts, json_values(floats), max_size=5)


# Python's json writes 1e-07 where pydantic writes 1e-7 (same number, other bytes):
# see test_float_with_padded_exponent_is_written_as_pydantic_does.
def same_bytes_as_pydantic(value: float) -> bool:
    return "e-0" not in repr(value)


@EXAMPLES
@given(content=json_documents())
def test_any_document_round_trips_as_content_and_as_error_details(content):
    assert_round_trips(document(content))
    assert_round_trips(error("failed", error_code=418, details=content))


@EXAMPLES
@given(content=json_documents(finite_floats.filter(same_bytes_as_pydantic)))
def test_any_document_frames_as_pydantic_json(content):
    event = document(content)
    assert event.sse_frame() == pydantic_frame(event, escape=True)


# Floats below 1e-4 are the one place our bytes differ from pydantic's (1e-07 against
# 1e-7): Python's float repr. Any JSON parser reads the same number, which is what counts.
@pytest.mark.parametrize("value", [1e-07, 2.5e-05, -3.75e-09])
def test_float_with_padded_exponent_still_reads_back_the_same(value):
    assert_round_trips(document({"x": value}))


# --- what cannot be framed or parsed --------------------------------------------------------


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")], ids=["nan", "inf", "-inf"])
@pytest.mark.parametrize(
    "build",
    [lambda v: document({"a": [{"b": v}]}), lambda v: error("x", details={"v": v}), lambda v: done(metadata={"m": v})],
    ids=["document", "error-details", "metadata"],
)
def test_non_finite_numbers_cannot_be_framed(build, value):
    with pytest.raises(ValueError, match="not JSON compliant"):
        build(value).sse_frame()


@pytest.mark.parametrize("build", TEXT_EVENTS.values(), ids=TEXT_EVENTS.keys())
def test_a_lone_surrogate_utf8_cannot_carry_is_replaced_so_the_frame_still_goes_out(build):
    frame = build("lone surrogate \ud800 here").sse_frame()
    frame.decode("utf-8")  # strict: the frame is valid UTF-8
    assert "lone surrogate \ufffd here" in frame.decode()
    ReferenceAdapter.validate_json(frame_data(frame))


def metadata_event_data(keys: int) -> str:
    return frame_data(text_block("x", metadata={f"k{n}": n for n in range(keys)}).sse_frame())


def test_metadata_with_sixteen_keys_parses():
    assert len(parse_event(metadata_event_data(16)).metadata) == 16


def test_metadata_with_more_than_sixteen_keys_fails_validation():
    with pytest.raises(ValidationError, match="at most 16 keys"):
        parse_event(metadata_event_data(17))


# --- what 0.3.0's event classes offered a hook ----------------------------------------------

Reference = pytest.importorskip("sentient_agent_framework.interface.events")


@ordinary_events
def test_model_dump_json_is_what_the_0_3_0_class_dumps_for_the_same_event(event):
    reference = ReferenceAdapter.validate_json(frame_data(event.sse_frame()))
    assert event.model_dump_json() == reference.model_dump_json()
    assert event.model_dump(mode="json") == reference.model_dump(mode="json")
    assert event.model_dump()["content_type"] == reference.model_dump()["content_type"]


@ordinary_events
def test_the_0_3_0_bases_and_content_type_enum_hold(event):
    assert isinstance(event, Event) and isinstance(event, BaseEvent)
    assert isinstance(event, StreamEvent) == isinstance(event, TextChunkEvent)
    assert isinstance(event, AtomicEvent) == (not isinstance(event, TextChunkEvent))
    assert isinstance(event.content_type, EventContentType)
    assert event.content_type == event.content_type.value  # still the string it always was
    expected_base = BaseEventType.CHUNKED if isinstance(event, TextChunkEvent) else BaseEventType.ATOMIC
    assert event.content_type.base_type is expected_base
    assert not hasattr(event, "__dict__")  # still slotted: the SSE path pays nothing for the bases


async def test_a_hook_written_for_0_3_0_that_dumps_each_event_runs_an_agent():
    class JsonLinesHook:  # as a 0.3.0 user writes one: model_dump_json() per event
        def __init__(self) -> None:
            self.lines: list[str] = []

        async def emit(self, event) -> None:
            event.id = EVENT_ID  # the service's hook stamps ids; this one does it itself
            self.lines.append(event.model_dump_json())

    hook = JsonLinesHook()
    handler = ResponseHandler(SOURCE, hook)
    await handler.emit_text_block("PLAN", "look it up")
    await handler.emit_json("SOURCES", {"results": [1, 2]})
    stream = handler.create_text_stream("FINAL_RESPONSE")
    await stream.emit_chunk("Hello")
    await stream.complete()
    await handler.emit_error("went wrong", 502)
    await handler.complete()
    kinds = [Reference.ResponseEventAdapter.validate_json(line).content_type.value for line in hook.lines]
    assert kinds == ["atomic.textblock", "atomic.json", "chunked.text", "chunked.text", "atomic.error", "atomic.done"]
