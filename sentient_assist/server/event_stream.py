"""EventStream: the response of POST /assist, one agent run written as Server-Sent Events.

    Run (agent task, ids, guarantees) -> SseHook (one serialization per event)
        -> EventStream (all ready frames in one write; a ping when idle) -> ASGI send

It is an ordinary Starlette `Response` returned by the path operation, so every
middleware, dependency and exception handler of the app applies to it. It is not
FastAPI's or sse-starlette's `EventSourceResponse`: both stream from a generator inside
anyio task groups, which about doubles what a waiting stream holds, and send each event
on its own, at several times the CPU per event (bench/README.md, "The response class").
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from sentient_assist.protocol.events import ResponseEvent
from sentient_assist.protocol.request import Query
from sentient_assist.runtime.agent import AbstractAgent
from sentient_assist.runtime.channel import Channel
from sentient_assist.runtime.pauses import PauseSealer
from sentient_assist.runtime.run import ChannelHook, Run, RunStats
from sentient_assist.runtime.run_input import NO_RUN_INPUT, RunInput
from sentient_assist.runtime.session import Session
from sentient_assist.server import metrics
from sentient_assist.server.open_streams import OpenStreams

# A comment line: clients skip it, proxies see a live connection.
PING_FRAME = b": ping\n\n"
MEDIA_TYPE = "text/event-stream"
SSE_HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-store"),
    (b"connection", b"keep-alive"),
    (b"x-accel-buffering", b"no"),  # nginx: pass each frame on, do not buffer the stream
]
LISTENER_TASK_NAME = "assist: waiting for the client to leave"
# The ASGI scope extension through which a server lets a response drop its connection at once,
# unsent bytes and all: `scope["extensions"][ABORT_EXTENSION]["abort"]()`. The service's uvicorn
# protocol offers it (sentient_assist/server/protocol.py); under a server without it, the
# connection of a stream cut off is closed as the server closes an unfinished response.
ABORT_EXTENSION = "sentient_assist.abort"

logger = logging.getLogger("sentient_assist.server")


def listen_for_the_client_leaving(run: Run[bytes], receive: Receive) -> asyncio.Future[Message]:
    """The body has been read: the next message can only be the client leaving, which ends
    the run (`Run.client_left`). Cancel the listener when the answer has been sent."""
    listener = asyncio.ensure_future(receive())
    listener.set_name(LISTENER_TASK_NAME)  # one string for every stream's listener
    listener.add_done_callback(run.client_left)
    return listener


def survive_cut_off(what: str, request_id: str, scope: Scope | None = None) -> None:
    """In a reader's `except CancelledError`, once the run says it was cut off: the open
    streams' watcher cancelled the reader of a client that stopped reading, and the run has
    ended. The connection of `scope` is aborted (`abort_connection`); the reader returns with
    its response unfinished, so the server closes the connection if it is not closed already
    (uvicorn logs that the response was not completed)."""
    task = asyncio.current_task()
    if task is not None:
        task.uncancel()
    if scope is not None:
        abort_connection(scope)
    logger.warning("%s cut off: its client stopped reading (request %s)", what, request_id)


def abort_connection(scope: Scope) -> bool:
    """Close the connection of `scope` now, dropping what it has not sent, where the server offers
    it (ABORT_EXTENSION); False where it does not. A close would wait to flush the unsent bytes to
    a client that does not read: their memory and the connection's descriptor held till it leaves."""
    extension = (scope.get("extensions") or {}).get(ABORT_EXTENSION)
    if extension is None:
        return False
    extension["abort"]()
    return True


class SseHook(ChannelHook[bytes]):
    """Puts each event on the channel as the bytes of its SSE frame."""

    __slots__ = ()

    def encode(self, event: ResponseEvent) -> bytes:
        return event.sse_frame()

    def size(self, item: bytes) -> int:
        return len(item)


class PendingRun:
    """A run a face has parsed and not started: it starts when its response is sent, so that a
    response that is never sent never starts an agent. `make_hook` is what each event is written
    as: its SSE frame (/assist), or another face's wire."""

    __slots__ = ("agent", "session", "query", "stats", "streams", "make_hook", "sealer", "run_input")

    def __init__(
        self,
        agent: AbstractAgent,
        session: Session,
        query: Query,
        stats: RunStats,
        streams: OpenStreams,
        make_hook: Callable[[Channel[bytes], RunStats], ChannelHook[bytes]] = SseHook,
        sealer: PauseSealer | None = None,
        run_input: RunInput = NO_RUN_INPUT,
    ) -> None:
        self.agent = agent
        self.session = session
        self.query = query
        self.stats = stats  # to the metrics when the run ends, and to the access log line
        self.streams = streams
        self.make_hook = make_hook
        self.sealer = sealer  # the service's, for the pauses this run makes and the one it resumes
        self.run_input = run_input

    def start(self) -> Run[bytes]:
        return Run(
            self.agent,
            self.session,
            self.query,
            watcher=self.streams,
            stats=self.stats,
            make_hook=self.make_hook,
            sealer=self.sealer,
            run_input=self.run_input,
        )


class EventStream(Response):
    """A run streamed; it starts when the server sends the response (`PendingRun`)."""

    # Its content type is in SSE_HEADERS. None here keeps FastAPI from documenting the 200 as
    # one string: the route documents it as a sequence of events (sentient_assist/server/assist.py).
    media_type = None

    def __init__(self, pending: PendingRun) -> None:
        super().__init__()  # Response's own start (status 200, no body); the headers are the stream's
        self.raw_headers = list(SSE_HEADERS)
        self._pending: PendingRun | None = pending
        self.stats = pending.stats

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        assert self._pending is not None, "an EventStream is sent once"
        run = self._pending.start()
        self._pending = None  # the run has it all; nothing else holds the request for the stream's life
        try:
            await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
            listener = listen_for_the_client_leaving(run, receive)
            try:
                # Every frame that is ready goes out in one write; a ping after a silent interval.
                # (In this frame, not a method of its own: each frame is held by every waiting stream.)
                while True:
                    batch = run.take_ready()
                    if batch is None:
                        await run.ready()
                        batch = run.take_ready()
                        if batch is None:  # woken for a keepalive: silent for a whole interval
                            await send({"type": "http.response.body", "body": PING_FRAME, "more_body": True})
                            continue
                    if not batch:
                        break
                    # No local keeps the frames: a waiting stream would hold its last write.
                    await send(
                        {
                            "type": "http.response.body",
                            "body": batch[0] if len(batch) == 1 else b"".join(batch),
                            "more_body": True,
                        }
                    )
                await send({"type": "http.response.body", "body": b"", "more_body": False})
            except OSError:
                pass  # the client is gone (servers that raise on a send after a disconnect)
            except asyncio.CancelledError:
                if not run.cut_off:
                    raise
                run.take_ready()  # its frames not sent are dropped now, not when what holds the run is collected
                survive_cut_off("stream", self.stats.request_id, scope)
            finally:
                listener.cancel()
        finally:
            run.reader_left()
            metrics.observe_stream(self.stats)
