"""SSE on the wire: frames from events, keepalive pings, and the end of open streams on shutdown.

    Run (agent task, ids, guarantees) -> SseHook (one serialization per event)
        -> AssistEndpoint (all ready frames in one write; a ping when idle) -> ASGI send
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from app.protocol.events import ErrorContent
from app.runtime.run import ChannelHook, Run
from app.server.draining import is_draining

logger = logging.getLogger("app.server")

SHUTDOWN_MESSAGE = "The server is shutting down; please retry."
# A comment line: clients skip it, proxies see a live connection.
PING_FRAME = b": ping\n\n"
SSE_HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-store"),
    (b"connection", b"keep-alive"),
    (b"x-accel-buffering", b"no"),  # nginx: pass each frame on, do not buffer the stream
]


class SseHook(ChannelHook[bytes]):
    """Puts each event on the channel as the bytes of its SSE frame."""

    __slots__ = ()

    def encode(self, event: Any) -> bytes:
        return event.sse_frame()


class OpenStreams:
    """The streams open in this process, ended when the server shuts down.

    One watcher task for all of them notices the shutdown (SIGTERM); each stream then runs
    on for `grace` seconds, after which its agent is cancelled and the client gets `error`
    (503) and `done`.
    """

    POLL_SECONDS = 0.5

    def __init__(self, grace: float) -> None:
        self._grace = grace
        self._runs: set[Run[bytes]] = set()
        self._watcher: asyncio.Task[None] | None = None
        self._draining = False

    def add(self, run: Run[bytes]) -> None:
        self._runs.add(run)
        if self._draining:
            self._end_later(run)
        elif self._watcher is None or self._watcher.done():
            self._watcher = asyncio.ensure_future(self._watch())

    def discard(self, run: Run[bytes]) -> None:
        self._runs.discard(run)

    async def _watch(self) -> None:
        while self._runs:
            if is_draining():
                self._draining = True
                for run in list(self._runs):
                    self._end_later(run)
                return
            await asyncio.sleep(self.POLL_SECONDS)

    def _end_later(self, run: Run[bytes]) -> None:
        if self._grace > 0:
            asyncio.get_running_loop().call_later(self._grace, _end_for_shutdown, run)
        else:
            _end_for_shutdown(run)


def _end_for_shutdown(run: Run[bytes]) -> None:
    if run.task.done():
        return
    error = ErrorContent(error_message=SHUTDOWN_MESSAGE, error_code=503, details={"request_id": run.stats.request_id})
    run.stop(error, outcome="shutdown")
