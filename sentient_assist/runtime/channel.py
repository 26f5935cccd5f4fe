"""A bounded, single-reader channel between an agent task and whoever reads it.

Writers wait for room *before* they make their item, then put it with no await
in between: items leave in the order they were made, even with several writer
tasks. The reader takes everything that is ready at once, so a burst of events
becomes one write. It holds no task of its own; a stream with nothing to say
costs a list and, while someone waits, one future.

It is bounded in items and, for items that say their size, in bytes: a reader that
does not keep up holds at most `max_bytes` (plus the one item that went past it).
"""

from __future__ import annotations

import asyncio
from typing import Generic, TypeVar

T = TypeVar("T")


class Channel(Generic[T]):
    __slots__ = ("_items", "_capacity", "_max_bytes", "_bytes", "_reader", "_writers", "_closed")

    def __init__(self, capacity: int = 256, max_bytes: int = 1 << 20) -> None:
        self._items: list[T] = []
        self._capacity = capacity
        self._max_bytes = max_bytes
        self._bytes = 0
        self._reader: asyncio.Future[None] | None = None
        self._writers: list[asyncio.Future[None]] | None = None  # made when a writer first waits
        self._closed = False

    @property
    def closed(self) -> bool:
        """True once the last item is in; the reader stops after taking it."""
        return self._closed

    def has_room(self) -> bool:
        return len(self._items) < self._capacity and self._bytes < self._max_bytes

    async def wait_for_room(self) -> None:
        while not self.has_room():
            waiter = asyncio.get_running_loop().create_future()
            if self._writers is None:
                self._writers = []
            self._writers.append(waiter)
            try:
                await waiter
            finally:
                if not waiter.done():
                    waiter.cancel()

    def put_nowait(self, item: T, size: int = 0, *, last: bool = False) -> None:
        """Put `item` (`size` bytes, when the items are bytes), whether there is room or not."""
        self._items.append(item)
        self._bytes += size
        if last:
            self._closed = True
        self.wake_reader()

    def close(self) -> None:
        """No more items: the reader takes what is left, then stops."""
        self._closed = True
        self.wake_reader()

    def wake_reader(self) -> None:
        """Wake the waiting reader; woken with nothing to take, it takes None (time for a keepalive)."""
        reader = self._reader
        if reader is not None and not reader.done():
            reader.set_result(None)

    def take_ready(self) -> list[T] | None:
        """Everything that is ready, without waiting: [] once closed and empty, None if nothing yet."""
        if not self._items:
            return [] if self._closed else None
        items = self._items
        self._items = []
        self._bytes = 0
        writers = self._writers
        if writers:
            self._writers = None
            for waiter in writers:
                if not waiter.done():
                    waiter.set_result(None)
        return items

    def ready(self) -> asyncio.Future[None]:
        """A future done when there is something to take, the channel closes, or `wake_reader()`.
        For one reader: the future replaces any earlier one."""
        self._reader = reader = asyncio.get_running_loop().create_future()
        if self._items or self._closed:
            reader.set_result(None)
        return reader
