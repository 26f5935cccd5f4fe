"""Forwarder: streams a sub-agent's events through to the client, under the sub-agent's source.

Live, each event goes out as it comes; held, events wait in order until `release()`
(so that concurrent sub-agents reach the client one after another, in a fixed order,
the first of them still streaming). Streams the sub-agent left open (it was
cancelled) are closed, so every text stream still ends with its last chunk.
"""

from __future__ import annotations

import dataclasses

from sentient_assist.protocol.events import ResponseEvent, TextChunkEvent
from sentient_assist.runtime.response_handler import ResponseHandler


class Forwarder:
    def __init__(self, handler: ResponseHandler) -> None:
        self._handler = handler
        self._live = True
        self._held: list[ResponseEvent] = []
        self._open: dict[str, TextChunkEvent] = {}

    @classmethod
    def held(cls, handler: ResponseHandler) -> Forwarder:
        """A forwarder that holds what it is given until `release()`."""
        forwarder = cls(handler)
        forwarder._live = False
        return forwarder

    async def __call__(self, event: ResponseEvent) -> None:
        event = dataclasses.replace(event)  # our id goes on a copy: the sub-agent's result keeps its own
        if isinstance(event, TextChunkEvent):
            if event.is_complete:
                self._open.pop(event.stream_id, None)
            else:
                self._open.setdefault(event.stream_id, event)
        if self._live:
            await self._handler.emit_event(event)
        else:
            self._held.append(event)

    async def release(self) -> None:
        """Send what was held, in order, and go live."""
        self._live = True
        held, self._held = self._held, []
        for event in held:
            await self._handler.emit_event(event)

    async def close_open_streams(self) -> None:
        """End every stream the sub-agent left open with its last chunk."""
        open_streams, self._open = self._open, {}
        for first in open_streams.values():
            await self(first.closing_chunk())
