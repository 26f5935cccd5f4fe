"""The body of `POST /assist`: a query and, optionally, the session it belongs to.

Every list and every string a client sends has a limit (docs/protocol.md, "Limits"), except
the texts themselves (prompts, event contents), which only the body's size bounds. The
limits are far above what Sentient Chat sends; they keep a hostile body from being repeated
in every event (processor_id is every event's `source`), and keep a bad body cheap to refuse:
a list stops at its first bad item, so a body of half a million bad items is one error.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError
from ulid import ULID

from sentient_assist.protocol.events import MAX_METADATA_KEYS, ResponseEvent
from sentient_assist.protocol.ulid import Ulid

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

    id: Ulid = Field(default_factory=ULID)
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
            self.root_request_id = self.id
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


def _error(kind: str | PydanticCustomError, loc: tuple[str | int, ...], value: object, **ctx: Any) -> InitErrorDetails:
    return InitErrorDetails(type=kind, loc=loc, input=value, ctx=ctx)


def event_size_error(event: Mapping[str, Any]) -> InitErrorDetails | None:
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


def _metadata_list_error(key: str, items: list[Any]) -> InitErrorDetails | None:
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


def _check_event_sizes(value: Any) -> Any:
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
