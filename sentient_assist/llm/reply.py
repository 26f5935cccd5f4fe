"""One model reply, streamed to the client as it arrives; the text streams a run's replies share;
and how such a run ends."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from sentient_assist.llm.messages import ChatMessage, ReasoningDelta, TextDelta, ToolCallRequest, ToolSpec
from sentient_assist.llm.model import ChatModel, ModelSettings
from sentient_assist.protocol import conventions as names
from sentient_assist.protocol.conventions import TokenUsage
from sentient_assist.runtime.errors import AgentRunError
from sentient_assist.runtime.response_handler import ResponseHandler
from sentient_assist.runtime.text_stream import StreamEventEmitter

TURN_SEPARATOR = "\n\n"
ONE_REQUEST = TokenUsage(requests=1)  # a reply's request, counted before it is made: one that fails was made too


class ReplyStreams:
    """A run's text streams by event name (FINAL_RESPONSE, THINKING): each opened on first use
    and shared by later replies, whose text starts a new paragraph; one that was closed opens
    anew."""

    def __init__(self, handler: ResponseHandler) -> None:
        self._handler = handler
        self._streams: dict[str, StreamEventEmitter] = {}
        self._turn_has_text: dict[str, bool] = {}

    def new_turn(self) -> None:
        self._turn_has_text = {}

    async def write(self, event_name: str, text: str) -> None:
        stream = self._streams.get(event_name)
        if stream is None or stream.is_complete:
            stream = self._streams[event_name] = self._handler.create_text_stream(event_name)
        elif not self._turn_has_text.get(event_name):
            await stream.emit_chunk(TURN_SEPARATOR)  # a later reply's text starts a new paragraph
        self._turn_has_text[event_name] = True
        await stream.emit_chunk(text)

    async def close(self, event_name: str, *, paragraph: bool = False) -> None:
        """End the stream; `paragraph` ends its text with a blank line, for what others say next."""
        stream = self._streams.get(event_name)
        if stream is not None and not stream.is_complete:
            if paragraph:
                await stream.emit_chunk(TURN_SEPARATOR)
            await stream.complete()


@dataclass
class Reply:
    """What one model reply came to: its text (when it was offered tools: see `stream_reply`),
    the tool calls it asked for, and the tokens the model reported for it (its request is the
    caller's to count: ONE_REQUEST)."""

    text: str = ""
    calls: list[ToolCallRequest] = field(default_factory=list)
    usage: TokenUsage = field(default_factory=TokenUsage)


async def stream_reply(
    model: ChatModel,
    messages: Sequence[ChatMessage],
    tools: Sequence[ToolSpec],
    settings: ModelSettings,
    streams: ReplyStreams,
) -> Reply:
    """One reply: reasoning to THINKING and text to FINAL_RESPONSE as they arrive (text before a
    tool call too), the tool calls collected, the reported tokens added up.

    The reply's text is kept only when the model was offered tools: it goes back to the model
    with the calls' results, while a reply with no tools ends the run, and its text has reached
    the client already. Kept, it is one string grown in place (a list of the deltas would hold
    an object, about 80 bytes, per token)."""
    streams.new_turn()
    keep_text = bool(tools)
    text = ""
    calls: list[ToolCallRequest] = []
    usage = TokenUsage()
    async for event in model.stream(messages, tools, settings):
        if isinstance(event, TextDelta):
            if keep_text:
                text += event.text
            await streams.write(names.FINAL_RESPONSE, event.text)
        elif isinstance(event, ReasoningDelta):
            await streams.write(names.THINKING, event.text)
        elif isinstance(event, ToolCallRequest):
            calls.append(event)
        elif isinstance(event, TokenUsage):
            usage += event
    return Reply(text, calls, usage)


async def finish_run(
    handler: ResponseHandler, streams: ReplyStreams, usage: TokenUsage, failure: AgentRunError | None
) -> None:
    """End a run of model replies, however it went: its text streams first, each once; then what
    went wrong, if anything; then the bill (USAGE); then `done`."""
    await streams.close(names.THINKING)
    await streams.close(names.FINAL_RESPONSE)
    if failure is not None:
        await handler.emit_error(failure.message, failure.error_code, failure.details or None)
    await handler.emit_json(names.USAGE, usage)
    await handler.complete()
