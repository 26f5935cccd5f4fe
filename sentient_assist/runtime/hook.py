"""Hooks: where a ResponseHandler's events go."""

from __future__ import annotations

import asyncio
from typing import Protocol

from sentient_assist.protocol.events import ResponseEvent
from sentient_assist.runtime.ids import MonotonicUlid


class Hook(Protocol):
    """Takes each event a ResponseHandler emits, in order."""

    async def emit(self, event: ResponseEvent) -> None: ...


class EventQueue(Protocol):
    """Where a QueueHook puts events: an `asyncio.Queue` of events (of any event type it holds)."""

    async def put(self, item: ResponseEvent, /) -> None: ...


class QueueHook:
    """Stamps each event with a monotonic ULID and puts it on an asyncio queue.

    The 0.3.0 package's `DefaultHook(queue)`: for running an agent in-process
    and reading its events as objects.
    """

    def __init__(
        self,
        queue: EventQueue,
        id_generator: MonotonicUlid | None = None,
        timeout_ms: int | None = None,
    ) -> None:
        self._queue = queue
        self._next_id = id_generator or MonotonicUlid()
        self._timeout = timeout_ms / 1000 if timeout_ms else None

    async def emit(self, event: ResponseEvent) -> None:
        event.id = self._next_id()
        if self._timeout is None:
            await self._queue.put(event)
        else:
            await asyncio.wait_for(self._queue.put(event), self._timeout)
