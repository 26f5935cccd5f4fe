"""KeptRun: one resumable run's frames, in this process, in order, with their event ids.

The pump (keeper.py) appends what the run sends; any number of readers follow it from their
own index. A reader waits on a future the next append resolves: no task of its own, and
nothing sent between a reader's check and its wait can be missed (the check and the wait
are one step of the event loop).
"""

from __future__ import annotations

import asyncio
import bisect
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sentient_assist.runtime.run import Run
    from sentient_assist.server.runs.buffer import SharedRuns

# What the run's hook puts on its channel: the event's id, its SSE frame, whether it is `done`.
Item = tuple[str, bytes, bool]


class KeptRun:
    """A run's frames so far (all of them: a resume may start from the first)."""

    __slots__ = (
        "handle",
        "key_digest",
        "source",
        "ids",
        "frames",
        "nbytes",
        "ended",
        "ended_at",
        "readers",
        "run",
        "pump",
        "shared",
        "grace_timer",
        "holds_place",
        "owner",
        "stopping",
        "_waiters",
    )

    def __init__(self, handle: str, key_digest: str, source: str) -> None:
        self.handle = handle
        self.key_digest = key_digest
        self.source = source  # the events' `source`: for the closing events another replica may write
        self.ids: list[str] = []
        self.frames: list[bytes] = []
        self.nbytes = 0
        self.ended = False
        self.ended_at = 0.0
        self.readers = 0
        self.run: Run[Item] | None = None
        self.pump: asyncio.Task[None] | None = None
        self.shared: SharedRuns | None = None  # where it is copied for the other replicas, if anywhere
        self.grace_timer: asyncio.TimerHandle | None = None
        self.holds_place = False  # a place under ASSIST_MAX_STREAMS, held while it runs detached
        self.owner = ""  # whose share of the places that is (its key's)
        self.stopping = False
        self._waiters: list[asyncio.Future[None]] = []

    def append(self, items: list[Item]) -> None:
        ids, frames = self.ids, self.frames
        for event_id, frame, last in items:
            ids.append(event_id)
            frames.append(frame)
            self.nbytes += len(frame)
            if last:
                self.ended = True
        if self.ended and not self.ended_at:
            self.ended_at = time.monotonic()
        self._wake()

    def end(self) -> None:
        """No more frames (the run ended; normally its `done` said so already)."""
        if not self.ended:
            self.ended = True
            self.ended_at = time.monotonic()
        self._wake()

    def index_after(self, event_id: str | None) -> int | None:
        """Where a reader that last received `event_id` goes on (0: from the first); None: the
        run never sent that id. Ids strictly increase, as strings too (ULIDs): a bisection."""
        if event_id is None:
            return 0
        event_id = event_id.upper()
        index = bisect.bisect_left(self.ids, event_id)
        if index < len(self.ids) and self.ids[index] == event_id:
            return index + 1
        return None

    def changed(self) -> asyncio.Future[None]:
        """Done at the next append or end (or `wake`)."""
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        return waiter

    def _wake(self) -> None:
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    def wake(self) -> None:
        self._wake()
