"""An agent's run as AG-UI events: each of our events read, in order, into the AG-UI events it
stands for, each made by ag-ui-protocol's own types and written by its own `EventEncoder`.

| our event | AG-UI |
|---|---|
| (the stream opens) | `RUN_STARTED` |
| a text stream (any name but `THINKING`) | `TEXT_MESSAGE_START`, `TEXT_MESSAGE_CONTENT` per chunk, `TEXT_MESSAGE_END` |
| a text block | the same three at once |
| `THINKING` (stream or block) | `REASONING_START`, `REASONING_MESSAGE_START`/`CONTENT`/`END`, `REASONING_END` |
| `TOOL_CALL` | `TOOL_CALL_START`, `TOOL_CALL_ARGS` (the arguments' JSON), `TOOL_CALL_END` |
| `TOOL_RESULT` | `TOOL_CALL_RESULT` (the result's JSON, or the error's text) |
| `STAGE` | `STEP_STARTED` (phase "start"), `STEP_FINISHED` (another phase; both when none started) |
| `HANDOFF` | `STEP_STARTED` "handoff:<agent>", finished at the next hand-off or the run's end |
| `USAGE` | summed into `RUN_FINISHED.usage` (`RUN_ERROR.usage`) |
| `OUTPUT` | `RUN_FINISHED.result` |
| `ASK_USER`, `INTERRUPT` | `RUN_FINISHED` with an interrupt outcome; the interrupt's id carries the pause's token |
| `INTERRUPT` of a client's tool | `TOOL_CALL_START`/`ARGS`/`END`, the token as its encrypted value, pending |
| `error` (the first) | `RUN_ERROR` in place of `RUN_FINISHED`: AG-UI sends nothing after it, so it waits for `done` |
| any other JSON document, a later `error` | `CUSTOM`, named by its event name |
| `done` | the open messages and steps ended, then `RUN_FINISHED` (or `RUN_ERROR`) |
"""

from __future__ import annotations

from typing import Any

from ag_ui.core import (
    CustomEvent,
    Interrupt,
    ReasoningEncryptedValueEvent,
    ReasoningEndEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    ReasoningStartEvent,
    RunErrorEvent,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
    StepFinishedEvent,
    StepStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)
from ag_ui.core import TokenUsage as AguiTokenUsage
from ag_ui.core.events import BaseEvent
from ag_ui.encoder import EventEncoder
from pydantic import ValidationError

from sentient_assist.protocol import conventions as names
from sentient_assist.protocol.conventions import TokenUsage
from sentient_assist.protocol.events import (
    DocumentEvent,
    DoneEvent,
    ErrorContent,
    ErrorEvent,
    ResponseEvent,
    TextBlockEvent,
    TextChunkEvent,
    dumps_json,
)
from sentient_assist.protocol.json_value import JSONValue
from sentient_assist.runtime.channel import Channel
from sentient_assist.runtime.pauses import PauseKind
from sentient_assist.runtime.run import ChannelHook, RunStats
from sentient_assist.server.agui.pauses import interrupt_id

PROTOCOL_VERSION = "1.0"
HANDOFF_STEP = "handoff:"  # a hand-off's step: "handoff:<the agent handed to>"
STARTING_PHASES = frozenset({"start", "started", "begin"})  # a STAGE that opens its step
ERROR_EVENT = "error"  # the CUSTOM name of an error after the first


class AguiWriter:
    """Reads one run's events, in order, as the module's table says; `read()` gives the bytes to
    send for each. `client_tools` are the names of the tools the client offered (their calls are
    the client's to answer); `answered_calls` the ids of the calls this run's input answers,
    whose TOOL_CALL and TOOL_RESULT the client holds already."""

    def __init__(
        self,
        thread_id: str,
        run_id: str,
        agent_name: str,
        *,
        client_tools: frozenset[str] = frozenset(),
        answered_calls: frozenset[str] = frozenset(),
    ) -> None:
        self.thread_id = thread_id
        self.run_id = run_id
        self.agent_name = agent_name
        self.client_tools = client_tools
        self.answered_calls = answered_calls
        self._encode = EventEncoder().encode
        self._messages: dict[str, str] = {}  # an open text stream's id -> its message id
        self._reasoning: dict[str, str] = {}  # an open THINKING stream's id -> its message id
        self._calls: set[str] = set()  # the tool calls started, whose results may follow
        self._steps: list[str] = []  # the steps open, oldest first
        self._handoff: str | None = None  # the open hand-off's step
        self._usage = TokenUsage()
        self._failure: ErrorContent | None = None
        self._interrupts: list[Interrupt] = []
        self._pending_calls: list[str] = []
        self._result: JSONValue = None

    def _bytes(self, *events: BaseEvent) -> bytes:
        return "".join(self._frame(event) for event in events).encode()

    def _frame(self, event: BaseEvent) -> str:
        try:
            frame: str = self._encode(event)
        except ValueError:
            # A lone surrogate (valid in a JSON request, and in a str) has no UTF-8 form, and
            # pydantic refuses to write one: the same event, each such character replaced.
            frame = self._encode(type(event).model_validate(_scrubbed(event.model_dump(by_alias=True))))
        return frame

    def started(self) -> bytes:
        return self._bytes(
            RunStartedEvent(thread_id=self.thread_id, run_id=self.run_id, protocol_version=PROTOCOL_VERSION)
        )

    def read(self, event: ResponseEvent) -> bytes:
        if type(event) is TextChunkEvent:
            return self._chunk(event)
        if type(event) is TextBlockEvent:
            return self._block(event)
        if type(event) is DocumentEvent:
            return self._document(event)
        if type(event) is ErrorEvent:
            if self._failure is None:
                self._failure = event.content
                return b""
            return self._bytes(CustomEvent(name=ERROR_EVENT, value=_error_value(event.content)))
        if type(event) is DoneEvent:
            return self._end()
        return b""

    def _metadata(self, event: TextChunkEvent | TextBlockEvent) -> dict[str, str] | None:
        """What a message's start says of where it came from, when it is not the plain answer."""
        metadata: dict[str, str] = {}
        if event.event_name not in (names.FINAL_RESPONSE, names.THINKING):
            metadata["eventName"] = event.event_name
        if event.source != self.agent_name:
            metadata["source"] = event.source
        return metadata or None

    def _chunk(self, event: TextChunkEvent) -> bytes:
        thinking = event.event_name == names.THINKING
        open_ = self._reasoning if thinking else self._messages
        message_id = open_.get(event.stream_id)
        out: list[BaseEvent] = []
        if message_id is None:
            if event.is_complete and not event.content:
                return b""  # a stream that said nothing: no message
            message_id = open_[event.stream_id] = _id(event)
            out += self._opening(thinking, message_id, event)
        if event.content:
            out.append(self._content(thinking, message_id, event.content))
        if event.is_complete:
            del open_[event.stream_id]
            out += self._closing(thinking, message_id)
        return self._bytes(*out)

    def _block(self, event: TextBlockEvent) -> bytes:
        thinking = event.event_name == names.THINKING
        message_id = _id(event)
        out = self._opening(thinking, message_id, event)
        if event.content:
            out.append(self._content(thinking, message_id, event.content))
        return self._bytes(*out, *self._closing(thinking, message_id))

    def _opening(self, thinking: bool, message_id: str, event: TextChunkEvent | TextBlockEvent) -> list[BaseEvent]:
        metadata = self._metadata(event)
        if thinking:
            return [
                ReasoningStartEvent(message_id=message_id, metadata=metadata),
                ReasoningMessageStartEvent(message_id=message_id, role="reasoning"),
            ]
        return [TextMessageStartEvent(message_id=message_id, role="assistant", metadata=metadata)]

    @staticmethod
    def _content(thinking: bool, message_id: str, text: str) -> BaseEvent:
        if thinking:
            return ReasoningMessageContentEvent(message_id=message_id, delta=text)
        return TextMessageContentEvent(message_id=message_id, delta=text)

    @staticmethod
    def _closing(thinking: bool, message_id: str) -> list[BaseEvent]:
        if thinking:
            return [ReasoningMessageEndEvent(message_id=message_id), ReasoningEndEvent(message_id=message_id)]
        return [TextMessageEndEvent(message_id=message_id)]

    def _document(self, event: DocumentEvent) -> bytes:
        name, content = event.event_name, event.content
        if name == names.TOOL_CALL:
            return self._tool_call(event)
        if name == names.TOOL_RESULT:
            return self._tool_result(event)
        if name == names.USAGE:
            try:
                self._usage += TokenUsage.model_validate(content)
            except ValidationError:
                pass  # not the convention's shape: not a bill
            return b""
        if name == names.OUTPUT and "output" in content:
            self._result = content["output"]
            return b""
        if name == names.STAGE and isinstance(content.get("stage"), str):
            return self._stage(content)
        if name == names.HANDOFF and isinstance(content.get("to_agent"), str):
            return self._handoff_step(content)
        if name == names.ASK_USER or name == names.INTERRUPT:
            return self._pause(event)
        return self._custom(event)

    def _custom(self, event: DocumentEvent) -> bytes:
        metadata = {"source": event.source} if event.source != self.agent_name else None
        return self._bytes(CustomEvent(name=event.event_name, value=event.content, metadata=metadata))

    def _tool_call(self, event: DocumentEvent) -> bytes:
        call_id, name, arguments = (event.content.get(key) for key in ("id", "name", "arguments"))
        if not isinstance(call_id, str) or not isinstance(name, str) or call_id in self._calls:
            return self._custom(event)  # not a call of the convention's shape, or one started already
        if call_id in self.answered_calls:
            return b""  # the client's call, answered by this run's input: it has both already
        self._calls.add(call_id)
        return self._bytes(*_call_events(call_id, name, arguments))

    def _tool_result(self, event: DocumentEvent) -> bytes:
        content = event.content
        call_id = content.get("id")
        if isinstance(call_id, str) and call_id in self.answered_calls:
            return b""
        if not isinstance(call_id, str) or call_id not in self._calls:
            return self._custom(event)  # a result of no call AG-UI was told of
        error = content.get("error")
        if isinstance(error, str):
            text, metadata = error, {"error": True}
        else:
            result = content.get("result")
            text, metadata = (result if isinstance(result, str) else dumps_json(result)), None
        return self._bytes(
            ToolCallResultEvent(message_id=_id(event), tool_call_id=call_id, content=text, metadata=metadata)
        )

    def _stage(self, content: dict[str, Any]) -> bytes:
        step = content["stage"]
        metadata = {"stage": content}
        if content.get("phase") in STARTING_PHASES:
            if step in self._steps:
                return self._bytes(CustomEvent(name=names.STAGE, value=content))  # open already: AG-UI refuses twice
            self._steps.append(step)
            return self._bytes(StepStartedEvent(step_name=step, metadata=metadata))
        if step in self._steps:
            self._steps.remove(step)
            return self._bytes(StepFinishedEvent(step_name=step, metadata=metadata))
        # A stage told only as it ends (the router's): a step begun and finished at once.
        return self._bytes(StepStartedEvent(step_name=step), StepFinishedEvent(step_name=step, metadata=metadata))

    def _handoff_step(self, content: dict[str, Any]) -> bytes:
        out: list[BaseEvent] = []
        if self._handoff is not None:
            out.append(self._finish_step(self._handoff))
        step = HANDOFF_STEP + content["to_agent"]
        if step in self._steps:  # handed to again while its step is open: that step goes on
            self._handoff = step
            return self._bytes(*out)
        self._handoff = step
        self._steps.append(step)
        out.append(StepStartedEvent(step_name=step, metadata={"handoff": content}))
        return self._bytes(*out)

    def _finish_step(self, step: str) -> BaseEvent:
        if step in self._steps:
            self._steps.remove(step)
        if step == self._handoff:
            self._handoff = None
        return StepFinishedEvent(step_name=step)

    def _pause(self, event: DocumentEvent) -> bytes:
        content = event.content
        token = content.get("token")
        kind: PauseKind = "ask_user" if event.event_name == names.ASK_USER else "interrupt"
        # Without a token (a handler of the agent's own), the pause is told and cannot be resumed.
        id_ = interrupt_id(kind, token) if isinstance(token, str) and token else f"unresumable:{event.id}"
        question = content.get("question")
        message = question if isinstance(question, str) and question else None
        if kind == "ask_user":
            choices = content.get("choices")
            schema: dict[str, Any] = {"type": "string"}
            if isinstance(choices, list) and choices and all(isinstance(c, str) for c in choices):
                schema["enum"] = choices
            self._interrupts.append(
                Interrupt(id=id_, reason=names.ASK_USER.lower(), message=message, response_schema=schema)
            )
            return b""
        call = content.get("tool_call")
        call = call if isinstance(call, dict) and isinstance(call.get("id"), str) else None
        if call is not None and call.get("name") in self.client_tools and isinstance(token, str):
            # The client's own tool: its call, for the client to answer, the token riding on it.
            call_id = call["id"]
            self._pending_calls.append(call_id)
            self._calls.add(call_id)
            return self._bytes(
                *_call_events(call_id, call["name"], call.get("arguments")),
                ReasoningEncryptedValueEvent(subtype="tool-call", entity_id=call_id, encrypted_value=id_),
            )
        reason = content.get("reason")
        self._interrupts.append(
            Interrupt(
                id=id_,
                reason=reason if isinstance(reason, str) and reason else "interrupt",
                message=message,
                tool_call_id=call["id"] if call is not None else None,
                response_schema={"type": ["boolean", "string"]},
                metadata={"toolCall": call} if call is not None else None,
            )
        )
        return b""

    def _end(self) -> bytes:
        out: list[BaseEvent] = []
        for message_id in self._messages.values():
            out.append(TextMessageEndEvent(message_id=message_id))
        for message_id in self._reasoning.values():
            out += self._closing(True, message_id)
        self._messages.clear()
        self._reasoning.clear()
        for step in reversed(self._steps):
            out.append(StepFinishedEvent(step_name=step))
        self._steps.clear()
        usage = self._usage_list()
        failure = self._failure
        if failure is not None:
            out.append(RunErrorEvent(message=failure.error_message, code=str(failure.error_code), usage=usage))
            return self._bytes(*out)
        outcome: RunFinishedInterruptOutcome | RunFinishedSuccessOutcome | None = None
        if self._interrupts:
            outcome = RunFinishedInterruptOutcome(interrupts=self._interrupts)
        elif self._pending_calls:
            outcome = RunFinishedSuccessOutcome(pending_tool_call_ids=self._pending_calls)
        out.append(
            RunFinishedEvent(
                thread_id=self.thread_id, run_id=self.run_id, result=self._result, outcome=outcome, usage=usage
            )
        )
        return self._bytes(*out)

    def _usage_list(self) -> list[AguiTokenUsage] | None:
        usage = self._usage
        if not (usage.input_tokens or usage.output_tokens or usage.total_tokens):
            return None
        # 0 is unreported here, and AG-UI leaves out what is unreported.
        return [
            AguiTokenUsage(
                input_tokens=usage.input_tokens or None,
                output_tokens=usage.output_tokens or None,
                total_tokens=usage.total_tokens or None,
            )
        ]


def _scrubbed(value: object) -> object:
    """`value` with each lone surrogate of its strings replaced (by "?")."""
    if isinstance(value, str):
        return value.encode("utf-8", "replace").decode()
    if isinstance(value, dict):
        return {_scrubbed(key): _scrubbed(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_scrubbed(item) for item in value]
    return value


def _id(event: ResponseEvent) -> str:
    """An event's id (a ULID, given as it is sent): the id of the message it opens."""
    return str(event.id)


def _call_events(call_id: str, name: str, arguments: object) -> list[BaseEvent]:
    return [
        ToolCallStartEvent(tool_call_id=call_id, tool_call_name=name),
        ToolCallArgsEvent(tool_call_id=call_id, delta=dumps_json(arguments if arguments is not None else {})),
        ToolCallEndEvent(tool_call_id=call_id),
    ]


def _error_value(error: ErrorContent) -> dict[str, object]:
    return {"message": error.error_message, "code": error.error_code}


class AguiHook(ChannelHook[bytes]):
    """The run's hook: RUN_STARTED on the channel as soon as the run is made, then each event, read
    by `writer`, as the bytes to send."""

    __slots__ = ("_writer",)

    def __init__(self, channel: Channel[bytes], stats: RunStats, writer: AguiWriter) -> None:
        super().__init__(channel, stats)
        self._writer = writer
        started = writer.started()
        channel.put_nowait(started, len(started))  # before the agent runs: the client knows it has begun

    def encode(self, event: ResponseEvent) -> bytes:
        return self._writer.read(event)

    def size(self, item: bytes) -> int:
        return len(item)
