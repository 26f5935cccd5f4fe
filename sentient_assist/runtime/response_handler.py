"""ResponseHandler: how an agent answers, one event at a time."""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from typing import Literal

from pydantic import BaseModel

from sentient_assist.protocol import conventions as names
from sentient_assist.protocol.conventions import InterruptPayload, ToolCallPayload
from sentient_assist.protocol.events import (
    DEFAULT_ERROR_CODE,
    EVENT_NAME_BREAKS,
    DocumentEvent,
    DoneEvent,
    ErrorContent,
    ErrorEvent,
    ResponseEvent,
    TextBlockEvent,
    TextChunkEvent,
    dumps_json,
)
from sentient_assist.protocol.json_value import JSONObject
from sentient_assist.protocol.request import MAX_NAME_LENGTH, event_size_error
from sentient_assist.runtime.agent import Identity
from sentient_assist.runtime.errors import AgentError, ResponseStreamClosedError
from sentient_assist.runtime.hook import Hook
from sentient_assist.runtime.pauses import PauseContext, PauseKind
from sentient_assist.runtime.reserved import OpenToolCalls, checked_stage
from sentient_assist.runtime.run_input import NO_RUN_INPUT, RunInput
from sentient_assist.runtime.text_stream import StreamEventEmitter
from sentient_assist.tracing import current_tracing


def check_event_name(event_name: object) -> str:
    """An event name must be one non-empty line (it is the frame's `event:` line), and no
    longer than a request's history accepts it back (MAX_NAME_LENGTH)."""
    if not isinstance(event_name, str) or not event_name:
        raise AgentError(f"event_name must be a non-empty str, got {event_name!r}")
    if EVENT_NAME_BREAKS.search(event_name) is not None:
        raise AgentError(f"event_name must not contain line breaks, got {event_name!r}")
    if len(event_name) > MAX_NAME_LENGTH:
        raise AgentError(f"event_name is at most {MAX_NAME_LENGTH} characters, got {len(event_name)}")
    return event_name


def _check_forwarded_sizes(event: ResponseEvent) -> None:
    """A forwarded event's names and metadata within what a request's history accepts: the
    client sends it back with the next turn, which must not be a 422."""
    source, stream_id = event.source, getattr(event, "stream_id", None) or ""
    if event.metadata is None and len(source) <= MAX_NAME_LENGTH and len(stream_id) <= MAX_NAME_LENGTH:
        return  # nearly every event (a forwarded token, say): no dict, no walk
    error = event_size_error({"source": source, "stream_id": stream_id, "metadata": event.metadata})
    if error is not None:
        where = ".".join(str(part) for part in error["loc"])
        limit = (error.get("ctx") or {}).get("max_length")
        most = f" (at most {limit})" if limit is not None else ""
        raise AgentError(f"a forwarded event's {where} is too long for the history it goes back in{most}")


def _check_json_object(what: str, data: object) -> JSONObject:
    if not isinstance(data, Mapping):
        raise AgentError(f"{what} must be a JSON object (a dict), got {type(data).__name__}")
    data = dict(data)
    try:
        dumps_json(data)
    except (TypeError, ValueError) as exc:
        raise AgentError(f"{what} must be JSON serializable: {exc}") from None
    return data


def _document(data: object) -> JSONObject:
    """What emit_json sends: a dict as it is, or a pydantic model (a typed payload) as its JSON."""
    if isinstance(data, BaseModel):
        try:
            data = data.model_dump(mode="json")
        except ValueError as exc:  # pydantic's serialization error
            raise AgentError(f"emit_json(data) must be JSON serializable: {exc}") from None
    return _check_json_object("emit_json(data)", data)


class ResponseHandler:
    """Emits an agent's events through a Hook; `complete()` ends the response with `done`."""

    __slots__ = (
        "_source",
        "_hook",
        "_streams",
        "_forwarded",
        "_tool_calls",
        "_closing",
        "_is_complete",
        "_pauses",
        "_run_input",
    )

    def __init__(
        self,
        source: str | Identity,
        hook: Hook,
        *,
        pauses: PauseContext | None = None,
        run_input: RunInput = NO_RUN_INPUT,
    ) -> None:
        self._source = source.id if isinstance(source, Identity) else source
        self._run_input = run_input
        self._hook = hook
        self._pauses = pauses  # where a pause's token is bound; None: pauses cannot be resumed
        # Made when first needed: a response that is only waiting holds none of them.
        self._streams: list[StreamEventEmitter] | None = None
        self._forwarded: dict[str, TextChunkEvent] | None = None  # open streams of other agents, sent through here
        self._tool_calls: OpenToolCalls | None = None  # TOOL_CALLs sent and not answered yet
        # complete()'s events not sent yet (it may be cut short waiting for room)
        self._closing: list[ResponseEvent] | tuple[()] = ()
        self._is_complete = False

    @property
    def is_complete(self) -> bool:
        return self._is_complete

    @property
    def source(self) -> str:
        return self._source

    @property
    def run_input(self) -> RunInput:
        """What this run was given beyond the session and the query: the pause it resumes, a
        client's tools, context and state (runtime/run_input.py); empty for a plain request."""
        return self._run_input

    def _check_open(self) -> None:
        if self._is_complete:
            raise ResponseStreamClosedError("the response is complete; nothing more can be sent")

    async def respond(self, event_name: str, response: Mapping[str, object] | BaseModel | str) -> None:
        """Send one text block or JSON document as the whole response, then complete it."""
        if isinstance(response, str):
            await self.emit_text_block(event_name, response)
        else:
            await self.emit_json(event_name, response)
        await self.complete()

    async def emit_json(self, event_name: str, data: Mapping[str, object] | BaseModel) -> None:
        """Send a JSON object under `event_name`: a dict, or a pydantic model such as a reserved payload.

        A `STAGE` must be labels and integer counts only (AgentError otherwise); a `TOOL_CALL`
        still unanswered when the response ends gets a `TOOL_RESULT` with an error."""
        self._check_open()
        content = _document(data)
        event_name = check_event_name(event_name)
        if event_name == names.STAGE:
            content = checked_stage(content)
        elif event_name == names.TOOL_CALL or event_name == names.TOOL_RESULT:
            if self._tool_calls is None:
                self._tool_calls = OpenToolCalls()
            self._tool_calls.sent(event_name, content)
        await self._hook.emit(DocumentEvent(event_name=event_name, source=self._source, content=content))

    async def ask_user(self, question: str, *, choices: Sequence[str] = (), state: object = None) -> None:
        """Ask the person, and end the response: `ASK_USER` (with `choices` to offer, if any),
        then `done`. The answer comes as the next request, its history holding this question;
        the agent then finds `session.resumed` (the answer, and `state`, JSON, as given here)."""
        if not isinstance(question, str) or not question:
            raise AgentError(f"ask_user(question) must be a non-empty str, got {question!r}")
        if isinstance(choices, str) or not all(isinstance(choice, str) for choice in choices):
            raise AgentError("ask_user(choices) must be a sequence of str")
        token = self._pause_token("ask_user", question, state)
        payload = {"question": question, "choices": list(choices), "token": token, "resumable": token is not None}
        await self._end_streams()
        await self.emit_json(names.ASK_USER, payload)
        await self.complete()

    async def interrupt(
        self, reason: str, *, question: str = "", tool_call: ToolCallPayload | None = None, state: object = None
    ) -> None:
        """Stop for a person's decision (`reason`: "approval" of `tool_call`), and end the
        response: `INTERRUPT`, then `done`. The decision comes back as `ask_user`'s answer does."""
        if not isinstance(reason, str) or not reason:
            raise AgentError(f"interrupt(reason) must be a non-empty str, got {reason!r}")
        token = self._pause_token("interrupt", question, state)
        payload = InterruptPayload(
            reason=reason, question=question, tool_call=tool_call, token=token, resumable=token is not None
        )
        await self._end_streams()
        await self.emit_json(names.INTERRUPT, payload)
        await self.complete()

    async def _end_streams(self) -> None:
        """End the open text streams: a pause's question is the last thing before `done`."""
        for stream in self._streams or ():
            if not stream.is_complete:
                await stream.complete()

    def _pause_token(self, kind: PauseKind, question: str, state: object) -> str | None:
        self._check_open()
        if current_tracing() is not None:  # an event on the run's invoke_agent span: its kind, never its token
            from sentient_assist.runtime.tracing import add_event

            add_event("sentient.pause", {"sentient.pause.kind": str(kind)})
        if self._pauses is None:
            return None  # a handler of the agent's own making: the pause is told, not resumable
        try:
            return self._pauses.token(kind, question, state)
        except (TypeError, ValueError) as exc:
            raise AgentError(f"a pause's state must be JSON: {exc}") from None

    async def emit_stage(
        self,
        stage: str,
        phase: str,
        outcome: str,
        *,
        capability: str | None = None,
        reason: str | None = None,
        counts: Mapping[str, int] | None = None,
    ) -> None:
        """Send a `STAGE`: where a multi-step run is (labels) and how much it did (integer
        counts), never what it saw or said."""
        await self.emit_json(
            names.STAGE,
            {
                "stage": stage,
                "phase": phase,
                "capability": capability,
                "outcome": outcome,
                "reason": reason,
                "counts": dict(counts or {}),
            },
        )

    async def emit_text_block(self, event_name: str, content: str) -> None:
        """Send a whole piece of text under `event_name`."""
        self._check_open()
        if not isinstance(content, str):
            raise AgentError(f"emit_text_block(content) must be a str, got {type(content).__name__}")
        await self._hook.emit(
            TextBlockEvent(event_name=check_event_name(event_name), source=self._source, content=content)
        )

    def create_text_stream(self, event_name: str) -> StreamEventEmitter:
        """Start a text stream: its chunks share `event_name` and a stream id."""
        self._check_open()
        stream = StreamEventEmitter(self, self._hook, self._source, check_event_name(event_name), secrets.token_hex(5))
        if self._streams is None:
            self._streams = []
        self._streams.append(stream)
        return stream

    async def emit_error(
        self,
        error_message: str,
        error_code: int = DEFAULT_ERROR_CODE,
        details: Mapping[str, object] | None = None,
    ) -> None:
        """Send an error event; the response goes on until `complete()`."""
        self._check_open()
        if not isinstance(error_message, str):
            raise AgentError(f"emit_error(error_message) must be a str, got {type(error_message).__name__}")
        if isinstance(error_code, bool) or not isinstance(error_code, int):
            raise AgentError(f"emit_error(error_code) must be an int, got {error_code!r}")
        content = ErrorContent(
            error_message=error_message,
            error_code=error_code,
            details=None if details is None else _check_json_object("emit_error(details)", details),
        )
        await self._hook.emit(ErrorEvent(source=self._source, content=content))

    async def emit_event(self, event: ResponseEvent) -> None:
        """Send a wire event made elsewhere (another agent's, forwarded), its source kept.

        For orchestration: the event gets this response's next id. `done` is not
        forwarded; `complete()` is the only way to end a response.
        """
        self._check_open()
        if isinstance(event, DoneEvent):
            raise AgentError("a forwarded `done` would end the response; call complete() instead")
        check_event_name(event.event_name)  # it becomes the frame's `event:` line, whoever made it
        _check_forwarded_sizes(event)
        if isinstance(event, TextChunkEvent):
            if self._forwarded is None:
                self._forwarded = {}
            if event.is_complete:
                self._forwarded.pop(event.stream_id, None)
            else:
                self._forwarded.setdefault(event.stream_id, event)
        await self._hook.emit(event)

    async def complete(self) -> None:
        """Complete every open text stream, then send `done`. Idempotent."""
        if self._is_complete:
            return
        # Closed before the first await: a second complete(), or an emit from another
        # task, cannot slip in between the last chunks and `done`.
        self._is_complete = True
        self._closing = [*self._last_events(), DoneEvent(source=self._source)]
        while self._closing:
            await self._hook.emit(self._closing[0])
            self._closing.pop(0)

    def _last_events(self) -> list[TextChunkEvent | DocumentEvent]:
        """What ends what is still open: the closing chunk of every stream (this agent's, and
        those it forwarded), then a TOOL_RESULT with an error for every unanswered TOOL_CALL."""
        last: list[TextChunkEvent | DocumentEvent] = [
            stream.last_chunk() for stream in self._streams or () if not stream.is_complete
        ]
        # The streams point back at this handler: let go of them, so that an ended run (its
        # hook, channel and session) is freed at once, not by the next full collection.
        self._streams = None
        forwarded, self._forwarded = self._forwarded or {}, None
        last += [first.closing_chunk() for first in forwarded.values()]
        if self._tool_calls is not None:
            last += [
                DocumentEvent(event_name=names.TOOL_RESULT, source=self._source, content=content)
                for content in self._tool_calls.unanswered()
            ]
        return last

    def close_now(
        self, error: ErrorContent | None = None, *, error_at: Literal["start", "end"] = "end"
    ) -> list[ResponseEvent]:
        """Mark the response complete at once; return the events that end it, for the server to send.

        For endings the agent does not choose: the last chunk of each open stream and a result
        for each unanswered tool call, then `error` if given (or the error first:
        `error_at="start"`), then `done`.
        """
        if self._is_complete:
            # complete() began and was cut short: what it had still to send, the error before `done`.
            unsent, self._closing = list(self._closing), ()
            if unsent and error is not None:
                unsent.insert(len(unsent) - 1, ErrorEvent(source=self._source, content=error))
            return unsent
        self._is_complete = True
        events: list[ResponseEvent] = list(self._last_events())
        if error is not None:
            events.insert(0 if error_at == "start" else len(events), ErrorEvent(source=self._source, content=error))
        events.append(DoneEvent(source=self._source))
        return events
