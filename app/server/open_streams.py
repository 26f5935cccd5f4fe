"""The /assist streams open in this process: a RunWatcher that also ends them on shutdown."""

from __future__ import annotations

from app.protocol.events import ErrorContent
from app.runtime.run import RunOutcome
from app.runtime.watcher import RunWatcher
from app.server.draining import is_draining

SHUTDOWN_MESSAGE = "The server is shutting down; please retry."


class OpenStreams(RunWatcher):
    """Keeps each stream's time limit (`error` 504) and keepalive pings, and once the server
    shuts down (SIGTERM), ends every stream still open `grace` seconds later (`error` 503)."""

    def __init__(self, *, ping_interval: float, time_limit: float, grace: float) -> None:
        super().__init__(time_limit=time_limit, keepalive=ping_interval)
        self._grace = grace
        self._drain_started: float | None = None

    def look_after(self, now: float) -> None:
        if self._drain_started is None and is_draining():
            self._drain_started = now
        if self._drain_started is not None and now >= self._drain_started + self._grace:
            for run in self.runs:
                if not run.task.done():
                    details = {"request_id": run.stats.request_id}
                    run.stop(
                        ErrorContent(error_message=SHUTDOWN_MESSAGE, error_code=503, details=details),
                        RunOutcome.SHUTDOWN,
                    )
        super().look_after(now)
