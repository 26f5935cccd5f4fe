"""The /assist streams open in this process: a RunWatcher that also ends them on shutdown, and
cuts off a stream whose writer is stuck on a client that does not read."""

from __future__ import annotations

from sentient_assist.protocol.events import ErrorContent
from sentient_assist.runtime.run import RunOutcome
from sentient_assist.runtime.watcher import RunWatcher
from sentient_assist.server.draining import is_draining

SHUTDOWN_MESSAGE = "The server is shutting down; please retry."
# How long a stream's writer has to send the end of a run ended by its time limit or by the
# shutdown before it is cut off: a client that reads takes it at once.
CUT_OFF_AFTER_SECONDS = 1.0


class OpenStreams(RunWatcher):
    """Keeps each stream's time limit (`error` 504) and keepalive pings, and once the server
    shuts down (SIGTERM), ends every stream still open `grace` seconds later (`error` 503).
    A stream still open a second after either end has a writer blocked on a client that does
    not read: it is cut off, and its connection closed."""

    def __init__(self, *, ping_interval: float, time_limit: float, grace: float) -> None:
        super().__init__(time_limit=time_limit, keepalive=ping_interval)
        self._grace = grace
        self._drain_started: float | None = None

    @property
    def grace(self) -> float:
        """Seconds a stream may go on once the server shuts down (ASSIST_SHUTDOWN_GRACE)."""
        return self._grace

    def look_after(self, now: float) -> None:
        if self._drain_started is None and is_draining():
            self._drain_started = now
        grace_ends = None if self._drain_started is None else self._drain_started + self._grace
        drained = grace_ends is not None and now >= grace_ends
        # A run that ended this long ago, and whose writer has still not taken its end, is stuck.
        stuck_if_started_before = now - self.time_limit - CUT_OFF_AFTER_SECONDS
        stuck_after_drain = grace_ends is not None and now >= grace_ends + CUT_OFF_AFTER_SECONDS
        for run in self.runs:
            if not run.task.done():
                if drained:
                    details = {"request_id": run.stats.request_id}
                    error = ErrorContent(error_message=SHUTDOWN_MESSAGE, error_code=503, details=details)
                    run.stop(error, RunOutcome.SHUTDOWN)
            elif stuck_after_drain or run.stats.started <= stuck_if_started_before:
                run.cut_off_reader()
        super().look_after(now)
