"""The SSE response: an agent run whose events go out as frame bytes, and its end on shutdown.

    Run (agent task, ids, guarantees) -> SseHook (one serialization per event)
        -> stream_run() (all ready frames in one write; a ping when idle) -> ASGI send

A waiting stream costs its run, this coroutine and one task that listens for the client
leaving: no task group, no ping task, no timer of its own (pings and time limits are
entries in shared `Deadlines`), nothing for shutdown until shutdown begins.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from starlette.types import Receive, Send

from app.protocol.events import ErrorContent
from app.runtime.deadlines import Deadlines
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
_END = {"type": "http.response.body", "body": b"", "more_body": False}


class SseHook(ChannelHook[bytes]):
    """Puts each event on the channel as the bytes of its SSE frame."""

    __slots__ = ()

    def encode(self, event: Any) -> bytes:
        return event.sse_frame()


async def stream_run(
    run: Run[bytes], receive: Receive, send: Send, *, pings: Deadlines[Run[bytes]], headers: list[tuple[bytes, bytes]],
) -> None:
    """Send `run` as an SSE response: every frame that is ready goes out in one write, and a
    ping when `pings` finds the stream silent. The agent stops if the client leaves."""
    await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS + headers})
    # The body has been read: the next message can only be the client leaving. Then the agent
    # stops, and the loop below ends with the run's closing events.
    listener = asyncio.ensure_future(receive())
    listener.add_done_callback(lambda task: task.cancelled() or run.stop(outcome="disconnected"))
    try:
        while True:
            batch = run.take_ready()
            if batch is None:
                pings.set(run)
                await run.ready()
                batch = run.take_ready()
                if batch is None:  # woken by `pings`: silent for a whole interval
                    await send({"type": "http.response.body", "body": PING_FRAME, "more_body": True})
                    continue
                pings.clear(run)
            if not batch:
                break
            await send({"type": "http.response.body", "body": batch[0] if len(batch) == 1 else b"".join(batch), "more_body": True})
        await send(_END)
    except OSError:
        pass  # the client is gone (servers that raise on a send after a disconnect); the run ends below
    finally:
        pings.clear(run)
        listener.cancel()
        run.reader_left()


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
