"""The /assist streams open in this process, and the one task that looks after all of them."""

from __future__ import annotations

import asyncio
import logging
import time

from app.protocol.events import ErrorContent
from app.runtime.run import Run
from app.server.draining import is_draining

logger = logging.getLogger("app.server")

SHUTDOWN_MESSAGE = "The server is shutting down; please retry."


class OpenStreams:
    """The /assist streams open in this process, looked after by one task for all of them.

    It wakes every `tick` seconds (at most half a second) and sees to three things: a
    ping for a stream silent for `ping_interval` seconds, the end of a run past its
    `time_limit` (`error` 504), and, once the server shuts down (SIGTERM), the end of
    every stream `grace` seconds later (`error` 503). So a waiting stream costs an entry
    in a dict, not timers of its own; pings and time limits keep to within a tick.
    """

    MAX_TICK_SECONDS = 0.5

    def __init__(self, *, ping_interval: float, time_limit: float, grace: float) -> None:
        self.ping_interval = ping_interval
        self.time_limit = time_limit
        self._grace = grace
        self._tick = min(self.MAX_TICK_SECONDS, ping_interval / 4, time_limit / 4)
        self._silent_since: dict[Run[bytes], float] = {}  # when each stream last had nothing to send
        self._watcher: asyncio.Task[None] | None = None
        self._drain_started: float | None = None

    def add(self, run: Run[bytes]) -> None:
        self._silent_since[run] = time.monotonic()
        if self._watcher is None or self._watcher.done():
            self._watcher = asyncio.ensure_future(self._watch())

    def silent(self, run: Run[bytes]) -> None:
        """`run` has nothing to send, from now on."""
        self._silent_since[run] = time.monotonic()

    def discard(self, run: Run[bytes]) -> None:
        self._silent_since.pop(run, None)

    async def _watch(self) -> None:
        while self._silent_since:
            await asyncio.sleep(self._tick)
            try:
                self.look_after(time.monotonic())
            except Exception:  # the watcher must outlive any one stream's trouble
                logger.exception("looking after the open streams failed")

    def look_after(self, now: float) -> None:
        """Ping the silent streams, time out the slow runs, end every stream once draining is over."""
        if self._drain_started is None and is_draining():
            self._drain_started = now
        if self._drain_started is not None and now >= self._drain_started + self._grace:
            for run in list(self._silent_since):
                _end_for_shutdown(run)
        ping_before = now - self.ping_interval
        started_before = now - self.time_limit
        for run, silent_since in list(self._silent_since.items()):
            if run.stats.started <= started_before:
                run.time_out()
            elif silent_since <= ping_before:
                run.wake_reader()  # the writer, if it is waiting, finds nothing and sends a ping


def _end_for_shutdown(run: Run[bytes]) -> None:
    if run.task.done():
        return
    error = ErrorContent(error_message=SHUTDOWN_MESSAGE, error_code=503, details={"request_id": run.stats.request_id})
    run.stop(error, outcome="shutdown")
