"""Reads wire events into AgentEvents, and AgentEvents into an AgentResult.

Both transports (in-process and HTTP) hand the same wire event objects to the
same reader, which is why they give the same results; and `run()` and `stream()` read
through the same ResultBuilder, which is why they give the same result, typed output and all.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, TypeAdapter, ValidationError

from sentient_assist.facade.events import AgentEvent, EventKind
from sentient_assist.facade.result import AgentResult, ErrorRecord, PendingInterrupt, StageRecord, ToolCall
from sentient_assist.protocol import conventions as names
from sentient_assist.protocol.conventions import TokenUsage
from sentient_assist.protocol.events import (
    DocumentEvent,
    DoneEvent,
    ErrorEvent,
    ResponseEvent,
    ResponseEventAdapter,
    TextBlockEvent,
    TextChunkEvent,
)
from sentient_assist.protocol.history import Message
from sentient_assist.runtime.reserved import NO_RESULT

_JSON_KINDS: dict[str, tuple[EventKind, type[BaseModel]]] = {
    names.TOOL_CALL: ("tool_call", names.ToolCallPayload),
    names.TOOL_RESULT: ("tool_result", names.ToolResultPayload),
    names.HANDOFF: ("handoff", names.HandoffPayload),
    names.STAGE: ("stage", names.StagePayload),
    names.USAGE: ("usage", names.TokenUsage),
    names.ASK_USER: ("ask_user", names.AskUserPayload),
    names.INTERRUPT: ("interrupt", names.InterruptPayload),
    names.OUTPUT: ("output", names.OutputPayload),
}


_TEXT_KINDS: dict[str, EventKind] = {names.FINAL_RESPONSE: "text_delta", names.THINKING: "thinking"}


class EventReader:
    """Turns each wire event into an AgentEvent with a dense index (None for an empty stream end)."""

    def __init__(self) -> None:
        self._index = 0
        self._calls: dict[str, ToolCall] = {}  # by id: a result's event names its call's arguments too

    def _make(self, kind: EventKind, event: ResponseEvent, **fields: Any) -> AgentEvent:
        made = AgentEvent(kind=kind, index=self._index, event_name=event.event_name, id=event.id, **fields)
        self._index += 1
        return made

    def read(self, event: ResponseEvent) -> AgentEvent | None:
        if isinstance(event, TextChunkEvent):
            if not event.content:
                return None  # the end of a stream carries nothing to read
            kind: EventKind = _TEXT_KINDS.get(event.event_name, "text")
            return self._make(kind, event, text=event.content, stream_id=event.stream_id)
        if isinstance(event, TextBlockEvent):
            kind = _TEXT_KINDS.get(event.event_name, "text_block")
            return self._make(kind, event, text=event.content)
        if isinstance(event, DocumentEvent):
            if event.event_name in _JSON_KINDS:
                kind, payload_model = _JSON_KINDS[event.event_name]
                try:
                    payload = payload_model.model_validate(event.content)
                except ValidationError:
                    pass  # not the convention's shape: kept as a plain document, not dropped
                else:
                    return self._make(kind, event, **self._typed(kind, payload))
            return self._make("document", event, data=event.content)
        if isinstance(event, ErrorEvent):
            content = event.content
            error = ErrorRecord(message=content.error_message, code=content.error_code, details=content.details)
            return self._make("error", event, error=error)
        if isinstance(event, DoneEvent):
            return self._make("done", event)
        raise TypeError(f"not a wire event: {type(event).__name__}")

    def _typed(self, kind: EventKind, payload: Any) -> dict[str, Any]:
        """The AgentEvent field of a reserved document's kind, from its validated payload."""
        if kind == "tool_call":
            call = self._calls[payload.id] = ToolCall(id=payload.id, name=payload.name, arguments=payload.arguments)
            return {"tool_call": call}
        if kind == "tool_result":
            called = self._calls.pop(payload.id, None)
            arguments = called.arguments if called is not None else {}
            answered = ToolCall(
                id=payload.id, name=payload.name, arguments=arguments, result=payload.result, error=payload.error
            )
            return {"tool_call": answered}
        if kind == "stage":
            return {"stage": StageRecord.model_validate(payload.model_dump())}
        if kind == "ask_user":
            return {"interrupt": PendingInterrupt.of_ask_user(payload)}
        if kind == "interrupt":
            return {"interrupt": PendingInterrupt.of_interrupt(payload)}
        if kind == "output":
            return {"output": payload.output}
        return {kind: payload}  # handoff, usage

    def cancelled(self) -> AgentEvent:
        made = AgentEvent(kind="cancelled", index=self._index, event_name="cancelled")
        self._index += 1
        return made


class ResultBuilder:
    """Accumulates one run's AgentEvents (and its wire events, for history) into an AgentResult:
    an AgentResult[output_type], its output validated as one, when `output_type` is given."""

    def __init__(self, prompt: str, history: tuple[Message, ...], output_type: type[Any] | None = None) -> None:
        self._prompt = prompt
        self._history = history
        self._output_type = output_type
        self._adapter: TypeAdapter[Any] | None = None
        self._built: AgentResult[Any] | None = None  # the last result(), until another event comes
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
        self._output: Any = None
        self._answered: set[str] = set()

    def add_wire(self, event: ResponseEvent) -> None:
        self._built = None
        self._wire_events.append(ResponseEventAdapter.dump_python(event, mode="json"))

    def add(self, event: AgentEvent) -> None:
        self._built = None
        kind = event.kind
        if kind == "text_delta":
            self._answer.append(event.text or "")
        elif kind in ("text_block", "text"):
            self._other_text.append(event.text or "")
        elif kind in ("tool_call", "tool_result") and event.tool_call is not None:
            self._tool_calls[event.tool_call.id] = event.tool_call
            if kind == "tool_result":
                self._answered.add(event.tool_call.id)
        elif kind == "usage" and event.usage is not None:
            self._usage += event.usage
        elif kind == "stage" and event.stage is not None:
            self._stages.append(event.stage)
        elif kind in ("ask_user", "interrupt"):
            self._interrupt = event.interrupt
        elif kind == "error" and event.error is not None:
            self._errors.append(event.error)
        elif kind == "output":
            self._output = event.output
        elif kind == "cancelled":
            self._cancelled = True
        if kind in ("done", "cancelled"):
            self._ended = True

    def result(self) -> AgentResult[Any]:
        """What the run produced so far; the same object each time until the next event, so
        the `done` event's result is `result()` once the run has ended."""
        if self._built is None:
            self._built = self._build()
        return self._built

    def _build(self) -> AgentResult[Any]:
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
        result: AgentResult[Any] = AgentResult(
            text=text,
            messages=self._history + turn,
            tool_calls=tuple(calls),
            usage=self._usage,
            stages=tuple(self._stages),
            errors=tuple(self._errors),
            interrupt=self._interrupt,
            cancelled=self._cancelled,
            output=self._output,
        )
        return result if self._output_type is None else self._with_typed_output(result, self._output_type)

    def _with_typed_output(self, result: AgentResult[Any], output_type: type[Any]) -> AgentResult[Any]:
        """`result` as an AgentResult[output_type]: its output validated, or, if it is not one,
        None and an error saying so (a remote agent can send anything)."""
        fields = {name: getattr(result, name) for name in AgentResult.model_fields}
        if result.output is not None:
            if self._adapter is None:
                self._adapter = TypeAdapter(output_type)
            try:
                fields["output"] = self._adapter.validate_python(result.output)
            except ValidationError as exc:
                fields["output"] = None
                name = getattr(output_type, "__name__", str(output_type))
                problem = f"the run's output is not a {name} ({exc.error_count()} errors)"
                fields["errors"] = (*result.errors, ErrorRecord(message=problem, code=502))
        return AgentResult[output_type].model_construct(**fields)  # type: ignore[valid-type]
