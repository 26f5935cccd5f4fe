"""The body of `POST /assist`: a query and, optionally, the session it belongs to.

Every list and every string a client sends has a limit (docs/protocol.md, "Limits"), except
the texts themselves (prompts, event contents), which only the body's size bounds. The
limits are far above what Sentient Chat sends; they keep a hostile body from being repeated
in every event (processor_id is every event's `source`), and keep a bad body cheap to refuse:
a list stops at its first bad item, so a body of half a million bad items is one error.
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from collections.abc import Callable, Mapping
from typing import Annotated, Literal, NotRequired

from pydantic import (
    AfterValidator,
    AliasChoices,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    Strict,
    StringConstraints,
    TypeAdapter,
    ValidationError,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError
from typing_extensions import TypedDict  # pydantic needs typing_extensions' before Python 3.12
from ulid import ULID

from sentient_assist.protocol.events import MAX_METADATA_KEYS, ResponseEvent
from sentient_assist.protocol.json_value import JSONObject, JSONValue
from sentient_assist.protocol.ulid import ULID_PATTERN, Ulid

ASSIST_CAPABILITY = "assist"

# A name or id the service may repeat: processor_id (every event's `source`), sender,
# recipients, a capability, and in past events their event_name, source, stream_id,
# schema_version and metadata keys. Sentient Chat's are ULIDs, UUIDs and short names.
MAX_NAME_LENGTH = 256
# A file id: room for a storage key or a URL.
MAX_FILE_ID_LENGTH = 1024
# A past event's metadata string value, or one string of a list value.
MAX_METADATA_TEXT_LENGTH = 4096
MAX_METADATA_LIST_ITEMS = 1000
MAX_INTERACTIONS = 10_000
# Events of one past answer: a streamed answer is a chunk per few tokens, thinking included.
MAX_RESPONSES = 100_000
MAX_PARTS = 1000
MAX_FILE_IDS = 1000
MAX_RECIPIENTS = 1000

Name = Annotated[str, Field(max_length=MAX_NAME_LENGTH)]
FileId = Annotated[str, Field(max_length=MAX_FILE_ID_LENGTH)]

EXAMPLE_QUERY_ID = "01JDQ4Z8M7T3V5X9A2B4C6D8EF"

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_PAIRS = [a + b for a in _CROCKFORD for b in _CROCKFORD]
_TO_BASE32 = str.maketrans(_CROCKFORD + _CROCKFORD.lower(), "0123456789abcdefghijklmnopqrstuv" * 2)


class _FreshUlids:
    """Fresh ULIDs, strictly increasing in this process, as python-ulid's `ULID()` makes them
    (the millisecond, then random bits, counting up within the millisecond), at a fraction
    of its cost: a history brings thousands of requests and events that came without an id.
    Within a millisecond the ids share their first 20 characters (the time and 50 random
    bits) and count up in the last 6."""

    __slots__ = ("_millisecond", "_base", "_prefix", "_count", "_lock")

    _COUNTER_BITS = 30

    def __init__(self) -> None:
        self._millisecond = -1
        self._base = 0
        self._prefix = ""
        self._count = 0
        self._lock = threading.Lock()

    def _next(self) -> None:
        """Move on to the next id (held by the caller's lock)."""
        millisecond = time.time_ns() // 1_000_000
        if millisecond > self._millisecond:
            self._millisecond = millisecond
            self._new_base(millisecond << 80 | int.from_bytes(os.urandom(10), "big"))
        elif self._count == (1 << self._COUNTER_BITS) - 1:
            self._new_base(self._base + (1 << self._COUNTER_BITS))
        else:
            self._count += 1

    def _new_base(self, value: int) -> None:
        self._base = value >> self._COUNTER_BITS << self._COUNTER_BITS
        self._prefix = _encoded(self._base)[:20]
        self._count = 0

    def ulid(self) -> ULID:
        with self._lock:
            self._next()
            value = self._base + self._count
        return ULID.from_int(value)

    def text(self) -> str:
        with self._lock:
            self._next()
            prefix, count = self._prefix, self._count
        p = _PAIRS
        return prefix + p[count >> 20] + p[count >> 10 & 1023] + p[count & 1023]

    def texts(self, most: int) -> Callable[[], str]:
        """A maker of up to `most` ids in a row, each greater than the last, from a block
        taken at once (a history's worth: no lock, no clock, per id); past `most`, `text()`'s."""
        with self._lock:
            self._next()
            if self._count + most >= 1 << self._COUNTER_BITS:
                self._new_base(self._base + (1 << self._COUNTER_BITS))
            prefix, first = self._prefix, self._count
            self._count += most  # the block is this caller's: the next id is past it
        counter, end, p = itertools.count(first), first + most, _PAIRS

        def next_text() -> str:
            count = next(counter)
            if count >= end:
                return self.text()
            return prefix + p[count >> 20] + p[count >> 10 & 1023] + p[count & 1023]

        return next_text


def _encoded(n: int) -> str:
    """The 26 characters of the ULID whose value is `n`."""
    p = _PAIRS
    return _CROCKFORD[n >> 125] + "".join(p[n >> shift & 1023] for shift in range(115, -1, -10)) + _CROCKFORD[n & 31]


_FRESH = _FreshUlids()


def fresh_ulid() -> ULID:
    """A new ULID, greater than every one this process made before."""
    return _FRESH.ulid()


def fresh_ulid_str() -> str:
    """A new ULID as its 26 characters, greater than every one this process made before."""
    return _FRESH.text()


def fresh_ulid_strs(most: int) -> Callable[[], str]:
    """A maker of new ULIDs as their characters, each greater than the one before (and than
    every one this process made before it was made): the first `most` at a fraction of
    `fresh_ulid_str()`'s cost."""
    return _FRESH.texts(most)


def ulid_of_valid(text: str) -> ULID:
    """The ULID of a string known to be one (of either case): python-ulid's `from_str` in C."""
    return ULID.from_int(int(text.translate(_TO_BASE32), 32))


class Query(BaseModel):
    """What the user asks now."""

    id: Ulid = Field(description="Query id, a ULID.")
    prompt: str = Field(description="The user's prompt.")


class AssistRequestContentPart(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    prompt: str = Field(description="Prompt text of this part.")
    files_ids: list[FileId] = Field(
        default_factory=list,
        alias="fileIds",
        max_length=MAX_FILE_IDS,
        fail_fast=True,
        description="Ids of files attached to this part (`files_ids` is accepted too).",
    )


class AssistRequestContentParts(BaseModel):
    parts: list[AssistRequestContentPart] = Field(max_length=MAX_PARTS, fail_fast=True)


class AssistRequestContent(BaseModel):
    capability: Name = ASSIST_CAPABILITY
    request_payload: AssistRequestContentParts


class AssistRequest(BaseModel):
    """A past user request, as Sentient Chat stores it in an interaction."""

    model_config = ConfigDict(populate_by_name=True)

    id: Ulid = Field(default_factory=fresh_ulid)
    chat_id: Ulid = Field(alias="chatId", description="Chat id (`chat_id` is accepted too).")
    content: AssistRequestContent
    parent_request_id: Ulid | None = None
    root_request_id: Ulid | None = None

    @model_validator(mode="after")
    def _stamp_root_request_id(self) -> AssistRequest:
        # The same rules as the 0.3.0 package, so that both accept the same requests.
        if self.parent_request_id is not None and self.root_request_id is None:
            raise ValueError("root_request_id is required when parent_request_id is given")
        if self.root_request_id is None:
            # As `self.root_request_id = self.id` leaves the model, without its cost per turn.
            self.__dict__["root_request_id"] = self.id
            self.__pydantic_fields_set__.add("root_request_id")
        if self.parent_request_id is not None:
            if self.parent_request_id >= self.id:
                raise ValueError("parent_request_id must be less than id")
            if self.root_request_id > self.parent_request_id:
                raise ValueError("root_request_id must not be greater than parent_request_id")
        return self

    @property
    def prompt(self) -> str:
        """The user's turn: the prompts of every part, joined with newlines."""
        return "\n".join(part.prompt for part in self.content.request_payload.parts)


class InteractionMessage(BaseModel):
    sender: Name | None = None
    recipients: Annotated[set[Name], Field(max_length=MAX_RECIPIENTS, fail_fast=True)] | None = None


class RequestMessage(InteractionMessage):
    event: AssistRequest


# What a past event holds that the service may repeat (its content is bounded by the body).
_EVENT_NAMES = ("event_name", "source", "stream_id", "schema_version")
_TOO_MANY_KEYS = "metadata holds at most {max_length} keys, got {actual_length}"


def _error(
    kind: str | PydanticCustomError, loc: tuple[str | int, ...], value: object, **ctx: object
) -> InitErrorDetails:
    return InitErrorDetails(type=kind, loc=loc, input=value, ctx=ctx)


def event_size_error(event: Mapping[str, object]) -> InitErrorDetails | None:
    """What is first too long in a past event: one of its names, or its metadata.

    Checked before the event classes validate the event: they count metadata keys only after
    validating every value, and a list value has no limit there, so a hostile metadata would
    cost one error per item. The ResponseHandler checks what it sends with it too: an event
    the service sent must come back as history without a 422."""
    for field in _EVENT_NAMES:
        value = event.get(field)
        if isinstance(value, str) and len(value) > MAX_NAME_LENGTH:
            return _error("string_too_long", (field,), value, max_length=MAX_NAME_LENGTH)
    metadata = event.get("metadata")
    if not isinstance(metadata, Mapping):
        return None
    if len(metadata) > MAX_METADATA_KEYS:
        sizes = {"max_length": MAX_METADATA_KEYS, "actual_length": len(metadata)}
        return _error(PydanticCustomError("too_long", _TOO_MANY_KEYS, sizes), ("metadata",), metadata)
    for key, value in metadata.items():
        if isinstance(key, str) and len(key) > MAX_NAME_LENGTH:
            return _error("string_too_long", ("metadata", key), key, max_length=MAX_NAME_LENGTH)
        if isinstance(value, str) and len(value) > MAX_METADATA_TEXT_LENGTH:
            return _error("string_too_long", ("metadata", key), value, max_length=MAX_METADATA_TEXT_LENGTH)
        if isinstance(value, list) and (error := _metadata_list_error(key, value)) is not None:
            return error
    return None


def _metadata_list_error(key: str, items: list[object]) -> InitErrorDetails | None:
    if len(items) > MAX_METADATA_LIST_ITEMS:
        return _error(
            "too_long",
            ("metadata", key),
            items,
            field_type="List",
            max_length=MAX_METADATA_LIST_ITEMS,
            actual_length=len(items),
        )
    for index, item in enumerate(items):
        # The first item that is not a string ends the check: the event classes would report every one.
        if not isinstance(item, str):
            return _error("string_type", ("metadata", key, index), item)
        if len(item) > MAX_METADATA_TEXT_LENGTH:
            return _error("string_too_long", ("metadata", key, index), item, max_length=MAX_METADATA_TEXT_LENGTH)
    return None


def _check_event_sizes(value: object) -> object:
    if isinstance(value, Mapping):
        error = event_size_error(value)
        if error is not None:
            raise ValidationError.from_exception_data("ResponseMessage", [error])
    return value


class ResponseMessage(InteractionMessage):
    event: Annotated[ResponseEvent, BeforeValidator(_check_event_sizes)]


class Interaction(BaseModel):
    """One past turn: the user's request and every event the agent answered with."""

    request: RequestMessage
    responses: list[ResponseMessage] = Field(default_factory=list, max_length=MAX_RESPONSES, fail_fast=True)


class SessionObject(BaseModel):
    """The chat this query belongs to, with its whole history."""

    processor_id: str = Field(
        max_length=MAX_NAME_LENGTH,
        description="The id of the agent (processor) answering; events carry it as `source`.",
    )
    activity_id: Ulid
    request_id: Ulid
    interactions: list[Interaction] = Field(default_factory=list, max_length=MAX_INTERACTIONS, fail_fast=True)


class Request(BaseModel):
    """The body of `POST /assist`."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "query": {"id": EXAMPLE_QUERY_ID, "prompt": "What can you do?"},
                    "session": {
                        "processor_id": "showcase",
                        "activity_id": "01JDQ4Z8M7T3V5X9A2B4C6D8EG",
                        "request_id": "01JDQ4Z8M7T3V5X9A2B4C6D8EH",
                        "interactions": [],
                    },
                }
            ]
        }
    )

    query: Query
    session: SessionObject | None = Field(
        default=None, description="Optional: without it the service makes a fresh session."
    )


# A history, checked: what `list[Interaction]` (SessionObject.interactions) accepts, and
# nothing else, told by a schema that pydantic-core checks in Rust alone (no Python function
# per ULID, per event, per default id), building plain dicts. It answers "is this history
# valid?" at a tenth of the cost of building its models, which are built later, if the agent
# reads them (sentient_assist/protocol/history.py). Every constraint of the models above has
# its twin here; tests/protocol/test_history_check.py holds the two to the same answers.
_UlidText = Annotated[str, StringConstraints(pattern=ULID_PATTERN)]
_NameText = Annotated[str, Field(max_length=MAX_NAME_LENGTH)]
_Recipients = Annotated[set[_NameText], Field(max_length=MAX_RECIPIENTS, fail_fast=True)] | None
# What `event_size_error` lets through: a name (when it is a string) and metadata values.
_StrictName = Annotated[str, Strict(), Field(max_length=MAX_NAME_LENGTH)]
_MetadataText = Annotated[str, Strict(), Field(max_length=MAX_METADATA_TEXT_LENGTH)]
_MetadataValueShape = (
    _MetadataText
    | Annotated[int, Strict()]
    | Annotated[float, Strict()]
    | Annotated[bool, Strict()]
    | Annotated[list[_MetadataText], Field(max_length=MAX_METADATA_LIST_ITEMS)]
)
_MetadataShape = Annotated[dict[_StrictName, _MetadataValueShape], Field(max_length=MAX_METADATA_KEYS)] | None
# `stream_id` on an event that is not a chunk: anything, but not a string too long (the
# before-check reads it on every event). Strict, so that no member takes a long string as a number.
_AnyButLongText = (
    _StrictName
    | Annotated[int, Strict()]
    | Annotated[float, Strict()]
    | Annotated[bool, Strict()]
    | None
    | Annotated[list[JSONValue], Strict()]
    | Annotated[JSONObject, Strict()]
)


class _PartShape(TypedDict):
    prompt: str
    files_ids: NotRequired[
        Annotated[
            list[Annotated[str, Field(max_length=MAX_FILE_ID_LENGTH)]],
            Field(max_length=MAX_FILE_IDS, fail_fast=True, validation_alias=AliasChoices("fileIds", "files_ids")),
        ]
    ]


class _PartsShape(TypedDict):
    parts: Annotated[list[_PartShape], Field(max_length=MAX_PARTS, fail_fast=True)]


class _ContentShape(TypedDict):
    capability: NotRequired[_NameText]
    request_payload: _PartsShape


class _RequestShape(TypedDict):
    """A past request without a parent: no order of ids to keep."""

    id: NotRequired[_UlidText]
    chat_id: Annotated[_UlidText, Field(validation_alias=AliasChoices("chatId", "chat_id"))]
    content: _ContentShape
    parent_request_id: NotRequired[None]
    root_request_id: NotRequired[_UlidText | None]


class _ChildRequestShape(TypedDict):
    """A past request with a parent, its ids' order checked by `_check_request_order`."""

    id: NotRequired[_UlidText]
    chat_id: Annotated[_UlidText, Field(validation_alias=AliasChoices("chatId", "chat_id"))]
    content: _ContentShape
    parent_request_id: _UlidText
    root_request_id: NotRequired[_UlidText | None]


def _check_request_order(request: _ChildRequestShape) -> _ChildRequestShape:
    """AssistRequest's own rules on its ids (`_stamp_root_request_id`), on their strings:
    upper-cased, ULIDs sort as their text does."""
    parent = request["parent_request_id"]
    root = request.get("root_request_id")
    if root is None:
        raise ValueError("root_request_id is required when parent_request_id is given")
    ident = request.get("id")
    if parent.upper() >= (fresh_ulid_str() if ident is None else ident.upper()):
        raise ValueError("parent_request_id must be less than id")
    if root.upper() > parent.upper():
        raise ValueError("root_request_id must not be greater than parent_request_id")
    return request


class _RequestMessageShape(TypedDict):
    sender: NotRequired[_NameText | None]
    recipients: NotRequired[_Recipients]
    # Most requests have no parent: no Python function is called for them.
    event: Annotated[
        _RequestShape | Annotated[_ChildRequestShape, AfterValidator(_check_request_order)],
        Field(union_mode="left_to_right"),
    ]


class _EventShape(TypedDict):
    schema_version: NotRequired[_StrictName]
    id: NotRequired[_UlidText | None]
    source: _StrictName
    metadata: NotRequired[_MetadataShape]


class _AtomicShape(_EventShape):
    stream_id: NotRequired[_AnyButLongText]


class _TextBlockShape(_AtomicShape):
    content_type: Literal["atomic.textblock"]
    event_name: _StrictName
    content: str


class _DocumentShape(_AtomicShape):
    content_type: Literal["atomic.json"]
    event_name: _StrictName
    content: JSONObject


class _TextChunkShape(_EventShape):
    content_type: Literal["chunked.text"]
    event_name: _StrictName
    stream_id: _StrictName
    is_complete: bool
    content: str


class _ErrorContentShape(TypedDict):
    error_message: str
    error_code: NotRequired[int]
    details: NotRequired[JSONObject | None]


class _ErrorShape(_AtomicShape):
    content_type: Literal["atomic.error"]
    event_name: NotRequired[Literal["error"]]
    content: _ErrorContentShape


class _DoneShape(_AtomicShape):
    content_type: Literal["atomic.done"]
    event_name: NotRequired[Literal["done"]]


class _ResponseMessageShape(TypedDict):
    sender: NotRequired[_NameText | None]
    recipients: NotRequired[_Recipients]
    event: Annotated[
        _TextBlockShape | _DocumentShape | _TextChunkShape | _ErrorShape | _DoneShape,
        Field(discriminator="content_type"),
    ]


class _InteractionShape(TypedDict):
    request: _RequestMessageShape
    responses: NotRequired[Annotated[list[_ResponseMessageShape], Field(max_length=MAX_RESPONSES, fail_fast=True)]]


HISTORY_CHECK: TypeAdapter[list[_InteractionShape]] = TypeAdapter(
    Annotated[list[_InteractionShape], Field(max_length=MAX_INTERACTIONS, fail_fast=True)]
)
