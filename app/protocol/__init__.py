"""Wire models of the /assist protocol (PROTOCOL.md): request, session, events. No I/O."""

from app.protocol.events import (
    DEFAULT_ERROR_CODE,
    DocumentEvent,
    DoneEvent,
    ErrorContent,
    ErrorEvent,
    ResponseEvent,
    ResponseEventAdapter,
    TextBlockEvent,
    TextChunkEvent,
    parse_event,
)
from app.protocol.request import (
    AssistRequest,
    AssistRequestContent,
    AssistRequestContentPart,
    AssistRequestContentParts,
    Interaction,
    Query,
    Request,
    RequestMessage,
    ResponseMessage,
    SessionObject,
)
from app.protocol.ulid import Ulid, UlidStr, is_ulid

__all__ = [
    "AssistRequest",
    "AssistRequestContent",
    "AssistRequestContentPart",
    "AssistRequestContentParts",
    "DEFAULT_ERROR_CODE",
    "DocumentEvent",
    "DoneEvent",
    "ErrorContent",
    "ErrorEvent",
    "Interaction",
    "Query",
    "Request",
    "RequestMessage",
    "ResponseEvent",
    "ResponseEventAdapter",
    "ResponseMessage",
    "SessionObject",
    "TextBlockEvent",
    "TextChunkEvent",
    "Ulid",
    "UlidStr",
    "is_ulid",
    "parse_event",
]
