"""Reads wire events into AgentEvents, and AgentEvents into an AgentResult.

Both transports (in-process and HTTP) hand the same wire event objects to the
same reader, which is why they give the same results.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ValidationError

from app.facade.events import AgentEvent, EventKind
from app.facade.result import AgentResult, ErrorRecord, PendingInterrupt, StageRecord, ToolCall
from app.protocol import conventions as names
from app.protocol.conventions import TokenUsage
from app.protocol.events import (
    DocumentEvent,
    DoneEvent,
    ErrorEvent,
    ResponseEventAdapter,
    TextBlockEvent,
    TextChunkEvent,
)
from app.protocol.history import Message
from app.runtime.reserved import NO_RESULT

_JSON_KINDS: dict[str, tuple[EventKind, type[BaseModel]]] = {
    names.TOOL_CALL: ("tool_call", names.ToolCallPayload),
    names.TOOL_RESULT: ("tool_result", names.ToolResultPayload),
    names.HANDOFF: ("handoff", names.HandoffPayload),
    names.STAGE: ("stage", names.StagePayload),
    names.USAGE: ("usage", names.TokenUsage),
    names.ASK_USER: ("ask_user", names.AskUserPayload),
}


_TEXT_KINDS: dict[str, EventKind] = {names.FINAL_RESPONSE: "text_delta", names.THINKING: "thinking"}


class EventReader:
    """Turns each wire event into an AgentEvent with a dense index (None for an empty stream end)."""

    def __init__(self) -> None:
        self._index = 0

    def _make(self, kind: EventKind, event: Any, **fields: Any) -> AgentEvent:
        made = AgentEvent(kind=kind, index=self._index, event_name=event.event_name, id=event.id, **fields)
        self._index += 1
        return made

    def read(self, event: Any) -> AgentEvent | None:
        if isinstance(event, TextChunkEvent):
            if not event.content:
                return None  # the end of a stream carries nothing to read
            kind: EventKind = _TEXT_KINDS.get(event.event_name, "text")
            return self._make(kind, event, text=event.content, stream_id=event.stream_id)
        if isinstance(event, TextBlockEvent):
            kind = _TEXT_KINDS.get(event.event_name, "text_block")
            return self._make(kind, event, text=event.content)
        if isinstance(event, DocumentEvent):
            kind, data = "document", event.content
            if event.event_name in _JSON_KINDS:
                reserved_kind, payload = _JSON_KINDS[event.event_name]
                try:
                    data = payload.model_validate(event.content).model_dump(mode="json")
                    kind = reserved_kind
                except ValidationError:
                    pass  # not the convention's shape: kept as a plain document, not dropped
            return self._make(kind, event, data=data)
        if isinstance(event, ErrorEvent):
            content = event.content
            data = {
                "error_message": content.error_message,
                "error_code": content.error_code,
                "details": content.details,
            }
            return self._make("error", event, text=content.error_message, data=data)
        if isinstance(event, DoneEvent):
            return self._make("done", event)
        raise TypeError(f"not a wire event: {type(event).__name__}")

    def cancelled(self) -> AgentEvent:
        made = AgentEvent(kind="cancelled", index=self._index, event_name="cancelled")
        self._index += 1
        return made


class ResultBuilder:
    """Accumulates one run's AgentEvents (and its wire events, for history) into an AgentResult."""

    def __init__(self, prompt: str, history: tuple[Message, ...]) -> None:
        self._prompt = prompt
        self._history = history
        self._answer: list[str] = []
        self._other_text: list[str] = []
        self._tool_calls: dict[str, ToolCall] = {}
        self._usage = TokenUsage()
        self._stages: list[StageRecord] = []
        self._errors: list[ErrorRecord] = []
        self._interrupt: PendingInterrupt | None = None
        self._wire_events: list[dict[str, Any]] = []
        self._cancelled = False
        self._ended = False
        self._answered: set[str] = set()

    def add_wire(self, event: Any) -> None:
        self._wire_events.append(ResponseEventAdapter.dump_python(event, mode="json"))

    def add(self, event: AgentEvent) -> None:
        kind, data = event.kind, event.data or {}
        if kind == "text_delta":
            self._answer.append(event.text or "")
        elif kind in ("text_block", "text"):
            self._other_text.append(event.text or "")
        elif kind == "tool_call":
            self._tool_calls[data["id"]] = ToolCall(id=data["id"], name=data["name"], arguments=data["arguments"])
        elif kind == "tool_result":
            call = self._tool_calls.get(data["id"]) or ToolCall(id=data["id"], name=data["name"])
            self._tool_calls[data["id"]] = call.model_copy(update={"result": data["result"], "error": data["error"]})
            self._answered.add(data["id"])
        elif kind == "usage":
            self._usage += TokenUsage.model_validate(data)
        elif kind == "stage":
            self._stages.append(StageRecord(**data))
        elif kind == "ask_user":
            self._interrupt = PendingInterrupt(**data)
        elif kind == "error":
            self._errors.append(
                ErrorRecord(message=data["error_message"], code=data["error_code"], details=data["details"])
            )
        elif kind == "cancelled":
            self._cancelled = True
        if kind in ("done", "cancelled"):
            self._ended = True

    def result(self) -> AgentResult:
        # docs/protocol.md, "A turn of history": the answer is FINAL_RESPONSE; without
        # one, the text blocks and other text streams in order.
        text = "".join(self._answer) if self._answer else "".join(self._other_text)
        turn = (
            Message(role="user", content=self._prompt),
            Message(role="assistant", content=text, events=tuple(self._wire_events)),
        )
        calls = list(self._tool_calls.values())
        if self._ended:  # a call the run never answered (an agent of another server) has its error
            calls = [
                call if call.id in self._answered else call.model_copy(update={"error": NO_RESULT}) for call in calls
            ]
        return AgentResult(
            text=text,
            messages=self._history + turn,
            tool_calls=tuple(calls),
            usage=self._usage,
            stages=tuple(self._stages),
            errors=tuple(self._errors),
            interrupt=self._interrupt,
            cancelled=self._cancelled,
        )
