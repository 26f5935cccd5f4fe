"""FrameSource: what a resumable stream's response reads, from a cursor on, whatever keeps the run.

`next_batch(wait)` gives the frames that follow the cursor, all that are there; None when
none came within `wait` seconds (time for a keepalive); [] once the run's last frame has
been given, or the source was closed (its client left).
"""

from __future__ import annotations

import asyncio
from typing import Protocol

from sentient_assist.server.runs.kept import KeptRun


class FrameSource(Protocol):
    async def next_batch(self, wait: float) -> list[bytes] | None: ...

    def close(self) -> None: ...


class LocalSource:
    """Follows a KeptRun of this process from `index` on."""

    __slots__ = ("_kept", "_index", "_closed", "_waiter")

    def __init__(self, kept: KeptRun, index: int) -> None:
        self._kept = kept
        self._index = index
        self._closed = False
        self._waiter: asyncio.Future[None] | None = None

    async def next_batch(self, wait: float) -> list[bytes] | None:
        kept = self._kept
        waited = False
        while not self._closed:
            frames = kept.frames
            if self._index < len(frames):
                batch = frames[self._index :]
                self._index = len(frames)
                return batch
            if kept.ended:
                return []
            if waited:
                return None
            self._waiter = kept.changed()
            try:
                async with asyncio.timeout(wait):
                    await self._waiter  # this reader's own future: cancelled on the timeout, harmlessly
            except TimeoutError:
                pass
            waited = True
        return []

    def close(self) -> None:
        self._closed = True
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)
