"""A bounded, single-reader channel between an agent task and whoever reads it.

Writers wait for room *before* they make their item, then put it with no await
in between: items leave in the order they were made, even with several writer
tasks. The reader takes everything that is ready at once, so a burst of events
becomes one write.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Generic, TypeVar

T = TypeVar("T")


class Channel(Generic[T]):
    __slots__ = ("_items", "_capacity", "_reader", "_writers", "_closed")

    def __init__(self, capacity: int = 256) -> None:
        self._items: deque[T] = deque()
        self._capacity = capacity
        self._reader: asyncio.Future[None] | None = None
        self._writers: deque[asyncio.Future[None]] = deque()
        self._closed = False

    @property
    def closed(self) -> bool:
        """True once the last item is in; the reader stops after taking it."""
        return self._closed

    def has_room(self) -> bool:
        return len(self._items) < self._capacity

    async def wait_for_room(self) -> None:
        while len(self._items) >= self._capacity:
            waiter = asyncio.get_running_loop().create_future()
            self._writers.append(waiter)
            try:
                await waiter
            finally:
                if not waiter.done():
                    waiter.cancel()

    def put_nowait(self, item: T, *, last: bool = False) -> None:
        self._items.append(item)
        if last:
            self._closed = True
        reader = self._reader
        if reader is not None and not reader.done():
            reader.set_result(None)

    def close(self) -> None:
        """No more items: the reader takes what is left, then stops."""
        self._closed = True
        reader = self._reader
        if reader is not None and not reader.done():
            reader.set_result(None)

    async def take_all(self) -> list[T]:
        """Everything that is ready; waits while there is nothing."""
        while not self._items:
            if self._closed:
                return []
            self._reader = asyncio.get_running_loop().create_future()
            try:
                await self._reader
            finally:
                self._reader = None
        items = list(self._items)
        self._items.clear()
        writers = self._writers
        while writers:
            waiter = writers.popleft()
            if not waiter.done():
                waiter.set_result(None)
        return items
