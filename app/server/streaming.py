"""The SSE bridge: an agent run whose events become frame bytes, and its end on shutdown.

    Run (agent task, ids, guarantees) -> SseHook (one serialization per event)
        -> sse_frames() (ready frames joined into one write) -> EventSourceResponse
"""

from __future__ import annotations

import asyncio
from contextlib import aclosing
from typing import Any, AsyncIterator

from app.protocol.events import ErrorContent
from app.protocol.request import Query
from app.runtime.agent import AbstractAgent
from app.runtime.run import ChannelHook, Run, RunStats
from app.runtime.session import Session

SHUTDOWN_MESSAGE = "The server is shutting down; please retry."
# A comment line: clients skip it, proxies see a live connection.
PING_FRAME = b": ping\n\n"


class SseHook(ChannelHook[bytes]):
    """Puts each event on the channel as the bytes of its SSE frame."""

    __slots__ = ()

    def encode(self, event: Any) -> bytes:
        return event.sse_frame()


class ShutdownSignal:
    """Set by sse-starlette when the server begins to shut down.

    The stream may run on for `grace` seconds; then its agent is cancelled and
    the client gets `error` (503) and `done`. It stands in for the `anyio.Event`
    that EventSourceResponse sets, so that no task per stream waits on one.
    """

    __slots__ = ("_grace", "_run", "_timer")

    def __init__(self, grace: float) -> None:
        self._grace = grace
        self._run: Run[bytes] | None = None
        self._timer: asyncio.TimerHandle | None = None

    def bind(self, run: Run[bytes]) -> None:
        self._run = run

    def set(self) -> None:
        if self._grace > 0:
            self._timer = asyncio.get_running_loop().call_later(self._grace, self.end_stream)
        else:
            self.end_stream()

    def cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()

    def end_stream(self) -> None:
        run = self._run
        if run is None or run.task.done():
            return
        error = ErrorContent(error_message=SHUTDOWN_MESSAGE, error_code=503, details={"request_id": run.stats.request_id})
        run.stop(error, outcome="shutdown")


async def sse_frames(
    agent: AbstractAgent,
    session: Session,
    query: Query,
    *,
    timeout: float,
    stats: RunStats,
    ping_interval: float,
    shutdown: ShutdownSignal | None = None,
) -> AsyncIterator[bytes]:
    """The bytes of the response: every frame that is ready goes out in one write, and a
    ping after `ping_interval` seconds of silence (our own: no timer task per stream)."""
    run = Run(agent, session, query, timeout=timeout, stats=stats, make_hook=SseHook)
    if shutdown is not None:
        shutdown.bind(run)
    try:
        async with aclosing(run.items(idle_after=ping_interval)) as batches:
            async for frames in batches:
                if not frames:
                    yield PING_FRAME
                else:
                    yield frames[0] if len(frames) == 1 else b"".join(frames)
    finally:
        if shutdown is not None:
            shutdown.cancel_timer()
