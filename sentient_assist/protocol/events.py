"""Response events: the five wire types, and each one's exact SSE frame.

The classes are plain slotted dataclasses so that an agent can emit tens of
thousands a second; pydantic validates them when they are parsed (history in a
session, a client reading a stream). `sse_frame()` writes the bytes of the
event's frame in one pass, field for field as docs/protocol.md orders them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, Any, Final, Literal

from pydantic import AfterValidator, Field, TypeAdapter

from sentient_assist.protocol.ulid import EventId

SCHEMA_VERSION = "1.0"
DEFAULT_ERROR_CODE = 500
ERROR_EVENT_NAME: Final = "error"
DONE_EVENT_NAME: Final = "done"
MAX_METADATA_KEYS = 16


class BaseEventType(StrEnum):
    """An event is atomic (whole) or chunked (a piece of a stream); as 0.3.0's enum."""

    ATOMIC = "atomic"
    CHUNKED = "chunked"


class EventContentType(StrEnum):
    """The five wire types, as 0.3.0's enum: a member is also its string ("atomic.json")."""

    JSON = "atomic.json"
    TEXTBLOCK = "atomic.textblock"
    TEXT_STREAM = "chunked.text"
    ERROR = "atomic.error"
    DONE = "atomic.done"

    @property
    def base_type(self) -> BaseEventType:
        return BaseEventType(self.value.split(".")[0])


TEXTBLOCK: Final = EventContentType.TEXTBLOCK
JSON: Final = EventContentType.JSON
TEXT_STREAM: Final = EventContentType.TEXT_STREAM
ERROR: Final = EventContentType.ERROR
DONE: Final = EventContentType.DONE

MetadataValue = str | int | float | bool | list[str]


def _check_metadata(value: dict[str, MetadataValue] | None) -> dict[str, MetadataValue] | None:
    if value is not None and len(value) > MAX_METADATA_KEYS:
        raise ValueError(f"metadata holds at most {MAX_METADATA_KEYS} keys, got {len(value)}")
    return value


EventMetadata = Annotated[dict[str, MetadataValue] | None, AfterValidator(_check_metadata)]

# Compact JSON, UTF-8 kept as is (what pydantic's model_dump_json writes).
_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode

# Characters a JSON encoder leaves raw but Python line splitters (httpx's, and so
# the official Sentient client's) treat as line ends: escaped, so a frame stays
# one `data:` line for every client.
_LINE_BREAKS_JSON_KEEPS = re.compile("[\x85\u2028\u2029]")
# Anything that would end the `event:` line of a frame.
EVENT_NAME_BREAKS = re.compile("[\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


def _escape_line_breaks(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def dumps_json(value: object) -> str:
    """Compact JSON as the wire carries it; raises TypeError/ValueError if it is not JSON."""
    return _dumps(value)


def _escaped(json_text: str) -> str:
    if _LINE_BREAKS_JSON_KEEPS.search(json_text) is not None:
        return _LINE_BREAKS_JSON_KEEPS.sub(_escape_line_breaks, json_text)
    return json_text


def _frame(event_name: str, data: str) -> bytes:
    return _encode("event: " + event_name + "\ndata: " + _escaped(data) + "\n\n")


def _encode(frame: str) -> bytes:
    try:
        return frame.encode()
    except UnicodeEncodeError:
        # A lone surrogate (from "\ud800" in a request, say) has no UTF-8 form: U+FFFD stands in.
        return frame.encode("utf-16", "surrogatepass").decode("utf-16", "replace").encode()


def _head(
    content_type: str, event_name: str, id: str | None, source: str, metadata: dict[str, MetadataValue] | None
) -> str:
    assert id is not None, "an event is framed once its hook has given it an id"
    return (
        '{"content_type":"'
        + content_type
        + '","event_name":'
        + _dumps(event_name)
        + ',"schema_version":"'
        + SCHEMA_VERSION
        + '","id":"'
        + id
        + '","source":'
        + _dumps(source)
        + ',"metadata":'
        + ("null" if metadata is None else _dumps(metadata))
    )


class Event:
    """The base of the five event classes, with what 0.3.0's pydantic events offered a hook:
    `model_dump()` and `model_dump_json()` (the same JSON as the wire's `data:` line, but for
    the escapes of U+2028/U+2029/U+0085 that frames add), and the bases 0.3.0 code tests with
    `isinstance`. The events themselves are slotted dataclasses: cheap to make and to frame."""

    __slots__ = ()

    def model_dump(self, *, mode: Literal["python", "json"] = "python", **options: Any) -> dict[str, Any]:
        dumped: dict[str, Any] = _adapter(type(self)).dump_python(self, mode=mode, **options)
        return dumped

    def model_dump_json(self, **options: Any) -> str:
        return _adapter(type(self)).dump_json(self, **options).decode()


class BaseEvent(Event):
    """An event with an id, a source and metadata: all five."""

    __slots__ = ()


class AtomicEvent(BaseEvent):
    """A whole event: a text block, a document, an error, done."""

    __slots__ = ()


class StreamEvent(BaseEvent):
    """A piece of a stream: a text chunk."""

    __slots__ = ()


_ADAPTERS: dict[type[Event], TypeAdapter[Event]] = {}


def _adapter(event_class: type[Event]) -> TypeAdapter[Event]:
    """Made on first use: a hook that never dumps never pays for it."""
    adapter = _ADAPTERS.get(event_class)
    if adapter is None:
        adapter = _ADAPTERS[event_class] = TypeAdapter(event_class)
    return adapter


@dataclass(slots=True, kw_only=True)
class TextBlockEvent(AtomicEvent):
    """A whole piece of text under a name the agent chooses."""

    content_type: Literal[EventContentType.TEXTBLOCK] = TEXTBLOCK
    event_name: str
    schema_version: str = SCHEMA_VERSION
    id: EventId = None
    source: str
    metadata: EventMetadata = None
    content: str

    def sse_frame(self) -> bytes:
        head = _head(TEXTBLOCK, self.event_name, self.id, self.source, self.metadata)
        return _frame(self.event_name, head + ',"content":' + _dumps(self.content) + "}")


@dataclass(slots=True, kw_only=True)
class DocumentEvent(AtomicEvent):
    """A JSON object under a name the agent chooses."""

    content_type: Literal[EventContentType.JSON] = JSON
    event_name: str
    schema_version: str = SCHEMA_VERSION
    id: EventId = None
    source: str
    metadata: EventMetadata = None
    content: dict[str, Any]

    def sse_frame(self) -> bytes:
        head = _head(JSON, self.event_name, self.id, self.source, self.metadata)
        return _frame(self.event_name, head + ',"content":' + _dumps(self.content) + "}")


@dataclass(slots=True, kw_only=True)
class TextChunkEvent(StreamEvent):
    """One chunk of a text stream; the last chunk of a stream has is_complete true."""

    content_type: Literal[EventContentType.TEXT_STREAM] = TEXT_STREAM
    event_name: str
    schema_version: str = SCHEMA_VERSION
    id: EventId = None
    source: str
    metadata: EventMetadata = None
    stream_id: str
    is_complete: bool
    content: str

    @classmethod
    def closing(cls, event_name: str, source: str, stream_id: str) -> TextChunkEvent:
        """The last chunk of a text stream: no content, is_complete true."""
        return cls(event_name=event_name, source=source, stream_id=stream_id, is_complete=True, content="")

    def closing_chunk(self) -> TextChunkEvent:
        """The last chunk of the stream this chunk belongs to."""
        return TextChunkEvent.closing(self.event_name, self.source, self.stream_id)

    def sse_frame(self) -> bytes:
        stream_id = self.stream_id
        # The hot path: metadata null and a stream id of letters and digits (as create_text_stream
        # makes them: a JSON string as it is).
        # All but the id, the stream id and the content is then the same for every chunk of
        # every stream of an event name and source.
        if self.metadata is not None or not (stream_id.isalnum() and stream_id.isascii()):
            return self._any_frame()
        key = (self.event_name, self.source, self.is_complete)
        template = _CHUNK_TEMPLATES.get(key)
        if template is None:
            template = _chunk_template(*key)
            if len(self.event_name) + len(self.source) <= _CHUNK_TEMPLATE_MAX_KEY:
                if len(_CHUNK_TEMPLATES) >= _CHUNK_TEMPLATES_LIMIT:
                    _CHUNK_TEMPLATES.clear()
                _CHUNK_TEMPLATES[key] = template
        content = _dumps(self.content)
        if _LINE_BREAKS_JSON_KEEPS.search(content) is not None:
            content = _LINE_BREAKS_JSON_KEEPS.sub(_escape_line_breaks, content)
        event_id = self.id
        assert event_id is not None, "an event is framed once its hook has given it an id"
        # One f-string: the frame's text is made in one allocation, not one per `+`.
        return _encode(f"{template[0]}{event_id}{template[1]}{stream_id}{template[2]}{content}}}\n\n")

    def _any_frame(self) -> bytes:
        head = _head(TEXT_STREAM, self.event_name, self.id, self.source, self.metadata)
        return _frame(
            self.event_name,
            head
            + ',"stream_id":'
            + _dumps(self.stream_id)
            + ',"is_complete":'
            + ("true" if self.is_complete else "false")
            + ',"content":'
            + _dumps(self.content)
            + "}",
        )


# (event_name, source, is_complete) -> the frame's text before the id, between the id and the
# stream id, and between the stream id and the content (the stream id's quotes included). Not
# per stream: every open stream would hold one (about 0.5 KB). Bounded in entries and in their
# size (a source comes from the client): emptied when full; long keys are not kept.
_CHUNK_TEMPLATES: dict[tuple[str, str, bool], tuple[str, str, str]] = {}
_CHUNK_TEMPLATES_LIMIT = 1024
_CHUNK_TEMPLATE_MAX_KEY = 256


def _chunk_template(event_name: str, source: str, is_complete: bool) -> tuple[str, str, str]:
    before_id = (
        "event: "
        + event_name
        + "\ndata: "
        + _escaped(
            '{"content_type":"chunked.text","event_name":' + _dumps(event_name) + ',"schema_version":"1.0","id":"'
        )
    )
    after_id = _escaped('","source":' + _dumps(source) + ',"metadata":null,"stream_id":"')
    after_stream_id = '","is_complete":' + ("true" if is_complete else "false") + ',"content":'
    return before_id, after_id, after_stream_id


@dataclass(slots=True, kw_only=True)
class ErrorContent:
    error_message: str
    error_code: int = DEFAULT_ERROR_CODE
    details: dict[str, Any] | None = None


@dataclass(slots=True, kw_only=True)
class ErrorEvent(AtomicEvent):
    """An error the client should show; more events may follow, `done` still ends the response."""

    content_type: Literal[EventContentType.ERROR] = ERROR
    event_name: Literal["error"] = ERROR_EVENT_NAME
    schema_version: str = SCHEMA_VERSION
    id: EventId = None
    source: str
    metadata: EventMetadata = None
    content: ErrorContent

    def sse_frame(self) -> bytes:
        head = _head(ERROR, ERROR_EVENT_NAME, self.id, self.source, self.metadata)
        content = self.content
        return _frame(
            ERROR_EVENT_NAME,
            head
            + ',"content":{"error_message":'
            + _dumps(content.error_message)
            + ',"error_code":'
            + _dumps(content.error_code)
            + ',"details":'
            + ("null" if content.details is None else _dumps(content.details))
            + "}}",
        )


@dataclass(slots=True, kw_only=True)
class DoneEvent(AtomicEvent):
    """The last event of every response."""

    content_type: Literal[EventContentType.DONE] = DONE
    event_name: Literal["done"] = DONE_EVENT_NAME
    schema_version: str = SCHEMA_VERSION
    id: EventId = None
    source: str
    metadata: EventMetadata = None

    def sse_frame(self) -> bytes:
        return _frame(DONE_EVENT_NAME, _head(DONE, DONE_EVENT_NAME, self.id, self.source, self.metadata) + "}")


ResponseEvent = Annotated[
    DocumentEvent | TextBlockEvent | TextChunkEvent | ErrorEvent | DoneEvent,
    Field(discriminator="content_type"),
]
ResponseEventAdapter: TypeAdapter[ResponseEvent] = TypeAdapter(ResponseEvent)


def parse_event(data: str | bytes | Mapping[str, object]) -> ResponseEvent:
    """Validate one event from its JSON (a frame's `data:` line) or a dict."""
    if isinstance(data, (str, bytes)):
        return ResponseEventAdapter.validate_json(data)
    return ResponseEventAdapter.validate_python(data)
