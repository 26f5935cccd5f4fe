"""The body of `POST /assist`: a query and, optionally, the session it belongs to."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator
from ulid import ULID

from app.protocol.events import ResponseEvent
from app.protocol.ulid import Ulid

ASSIST_CAPABILITY = "assist"

EXAMPLE_QUERY_ID = "01JDQ4Z8M7T3V5X9A2B4C6D8EF"


class Query(BaseModel):
    """What the user asks now."""

    id: Ulid = Field(description="Query id, a ULID.")
    prompt: str = Field(description="The user's prompt.")


class AssistRequestContentPart(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    prompt: str = Field(description="Prompt text of this part.")
    files_ids: list[str] = Field(
        default_factory=list,
        alias="fileIds",
        description="Ids of files attached to this part (`files_ids` is accepted too).",
    )


class AssistRequestContentParts(BaseModel):
    parts: list[AssistRequestContentPart]


class AssistRequestContent(BaseModel):
    capability: str = ASSIST_CAPABILITY
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
    sender: str | None = None
    recipients: set[str] | None = None


class RequestMessage(InteractionMessage):
    event: AssistRequest


class ResponseMessage(InteractionMessage):
    event: ResponseEvent


class Interaction(BaseModel):
    """One past turn: the user's request and every event the agent answered with."""

    request: RequestMessage
    responses: list[ResponseMessage] = Field(default_factory=list)


class SessionObject(BaseModel):
    """The chat this query belongs to, with its whole history."""

    processor_id: str = Field(description="The id of the agent (processor) answering; events carry it as `source`.")
    activity_id: Ulid
    request_id: Ulid
    interactions: list[Interaction] = Field(default_factory=list)


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
