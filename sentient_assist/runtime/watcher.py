"""RunWatcher: one timer that keeps the time limit of many runs, and wakes the silent ones' readers.

A run registers itself when it starts and leaves when its reader is done, so a waiting run
costs an entry in a dict rather than timers of its own. The watcher wakes every tick (at
most half a second, a quarter of the time limit or keepalive interval when those are
shorter): time limits and keepalives keep to within a tick.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Protocol

from sentient_assist.runtime.head_start import HeadStart

if TYPE_CHECKING:
    from sentient_assist.protocol.events import ErrorContent
    from sentient_assist.runtime.run import RunOutcome, RunStats

logger = logging.getLogger("sentient_assist.run")

MAX_TICK_SECONDS = 0.5


class WatchedRun(Protocol):
    """What a watcher (and the server's, OpenStreams) does with a run: a `Run` of any encoded type."""

    @property
    def stats(self) -> RunStats: ...

    @property
    def task(self) -> asyncio.Task[object]: ...

    def time_out(self) -> None: ...

    def wake_reader(self) -> None: ...

    def stop(self, error: ErrorContent | None = None, outcome: RunOutcome | None = None) -> None: ...

    def cut_off_reader(self) -> None: ...


class RunWatcher:
    """Times out the runs past `time_limit` (`error` 504, the agent cancelled); with a
    `keepalive` interval, wakes the reader of a run silent that long (time for a ping)."""

    def __init__(self, *, time_limit: float, keepalive: float | None = None) -> None:
        self.time_limit = time_limit
        self.keepalive = keepalive
        self._tick = min(MAX_TICK_SECONDS, time_limit / 4, keepalive / 4 if keepalive else MAX_TICK_SECONDS)
        self._silent_since: dict[WatchedRun, float] = {}  # each run, and since when its reader has waited
        self._timer: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        # The runs whose agent has not yet taken its first step: a request waits its turn behind them.
        self.head_start = HeadStart()

    @property
    def runs(self) -> list[WatchedRun]:
        return list(self._silent_since)

    def add(self, run: WatchedRun) -> None:
        """`run` has started: its agent's task was just created."""
        self._silent_since[run] = time.monotonic()
        self.head_start.started()
        loop = asyncio.get_running_loop()
        # Set when the first run comes, and cancelled when the last one leaves; a watcher may
        # serve the runs of one event loop, then of another (asyncio.run, again and again).
        if self._timer is None or self._loop is not loop:
            self._loop = loop
            self._timer = loop.call_later(self._tick, self._on_tick)

    def silent(self, run: WatchedRun) -> None:
        """The reader of `run` waits: it has nothing to send from now on."""
        self._silent_since[run] = time.monotonic()

    def discard(self, run: WatchedRun) -> None:
        self._silent_since.pop(run, None)
        if not self._silent_since and self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _on_tick(self) -> None:
        self._timer = None
        try:
            self.look_after(time.monotonic())
        except Exception:  # the watcher must outlive any one run's trouble
            logger.exception("looking after the runs failed")
        if self._silent_since and self._loop is not None:
            self._timer = self._loop.call_later(self._tick, self._on_tick)

    def look_after(self, now: float) -> None:
        """One tick: time out the slow runs, wake the readers silent for a keepalive interval."""
        started_before = now - self.time_limit
        ping_before = now - self.keepalive if self.keepalive else None
        for run, silent_since in list(self._silent_since.items()):
            if run.stats.started <= started_before:
                run.time_out()
            elif ping_before is not None and silent_since <= ping_before:
                run.wake_reader()  # the reader, if it waits, finds nothing: time for a keepalive
