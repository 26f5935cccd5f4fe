"""A text stream: one answer sent chunk by chunk under one event name."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sentient_assist.protocol.events import TextChunkEvent
from sentient_assist.runtime.errors import AgentError, ResponseStreamClosedError, TextStreamClosedError
from sentient_assist.runtime.hook import Hook

if TYPE_CHECKING:
    from sentient_assist.runtime.response_handler import ResponseHandler


class StreamEventEmitter:
    """What `ResponseHandler.create_text_stream()` returns."""

    __slots__ = ("_handler", "_hook", "_source", "_event_name", "_stream_id", "_is_complete")

    def __init__(self, handler: ResponseHandler, hook: Hook, source: str, event_name: str, stream_id: str) -> None:
        self._handler = handler
        self._hook = hook
        self._source = source
        self._event_name = event_name
        self._stream_id = stream_id
        self._is_complete = False

    @property
    def id(self) -> str:
        return self._stream_id

    @property
    def event_name(self) -> str:
        return self._event_name

    @property
    def is_complete(self) -> bool:
        return self._is_complete

    async def emit_chunk(self, chunk: str) -> StreamEventEmitter:
        """Send the next piece of text."""
        if self._is_complete:
            if self._handler.is_complete:
                raise ResponseStreamClosedError("the response is complete; nothing more can be sent")
            raise TextStreamClosedError(f"text stream {self._stream_id} ({self._event_name}) is complete")
        if type(chunk) is not str:
            if not isinstance(chunk, str):
                raise AgentError(f"emit_chunk(chunk): chunk must be a str, got {type(chunk).__name__}")
            chunk = str(chunk)
        await self._hook.emit(
            TextChunkEvent(
                event_name=self._event_name,
                source=self._source,
                stream_id=self._stream_id,
                is_complete=False,
                content=chunk,
            )
        )
        return self

    async def complete(self) -> None:
        """End the stream with its last chunk (empty, is_complete true). Idempotent."""
        if not self._is_complete:
            await self._hook.emit(self.last_chunk())

    def last_chunk(self) -> TextChunkEvent:
        """Mark the stream complete and return its closing chunk, for the caller to send."""
        self._is_complete = True
        return TextChunkEvent.closing(self._event_name, self._source, self._stream_id)
