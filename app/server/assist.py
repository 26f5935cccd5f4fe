"""POST /assist: the request checked, read and parsed; then its agent's run, streamed as SSE.

The service serves it ahead of FastAPI's middleware and routing (see `Service` in app.py),
so that a stream holds nothing but this coroutine, its run, a task listening for the client
to leave and uvicorn's connection: about 4 KB over a bare ASGI app, where FastAPI's routing,
exception and middleware layers and sse-starlette's task group per stream held 40 KB
(bench/README.md has the measurements). It applies the same
rules as the rest of the service, in the same order: the API key (401), the stream limit
and draining (503), the body size (413), the body itself (400/422), then the stream.
"""

from __future__ import annotations

import asyncio
import time

from starlette.datastructures import Headers
from starlette.types import Receive, Scope, Send

from app.protocol.request import Request
from app.runtime.agent import AbstractAgent
from app.runtime.run import Run, RunStats
from app.runtime.session import Session
from app.server.access_log import CLIENT_CLOSED_REQUEST, log_request, request_id_header, request_id_of
from app.server.auth import BearerKeys
from app.server.limits import ClientGone, StreamGate, read_body
from app.server.responses import Refusal, send_refusal
from app.server.settings import Settings
from app.server.streaming import PING_FRAME, SSE_HEADERS, OpenStreams, SseHook
from app.server.validation import parse_request

ASSIST_PATH = "/assist"
LISTENER_TASK_NAME = "assist: waiting for the client to leave"


class AssistEndpoint:
    """The ASGI app of POST /assist for one agent and its settings."""

    def __init__(self, agent: AbstractAgent, settings: Settings, keys: BearerKeys, gate: StreamGate) -> None:
        self.agent = agent
        self.keys = keys
        self.gate = gate
        self.streams = OpenStreams(
            ping_interval=settings.ping_interval, time_limit=settings.request_timeout, grace=settings.shutdown_grace
        )
        self._max_body_bytes = settings.max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # One coroutine from the request to the end of its stream: every frame of ours
        # that a waiting stream holds costs memory on each of thousands of streams.
        started = time.perf_counter()
        request_id = request_id_of(scope)
        status = CLIENT_CLOSED_REQUEST  # until an answer starts: a client that left first, as nginx logs it
        stats: RunStats | None = None
        gate = self.gate
        counted = False
        try:
            refusal = self.keys.refusal(scope) or gate.refusal()
            if refusal is None:
                # Counted from here, before the body arrives: concurrent requests cannot all
                # pass the check while their bodies are still coming in.
                gate.enter()
                counted = True
                request = await self._read_request(scope, receive)
                if isinstance(request, Refusal):
                    refusal = request
            if refusal is not None:
                status = await send_refusal(send, refusal, [request_id_header(request_id)])
                return
            stats = RunStats(request_id)
            run = self._start(request, stats)
            del request  # the run has what it needs; the rest of the body is not held for the stream's life
            streams = self.streams
            try:
                status = 200
                await send({"type": "http.response.start", "status": 200, "headers": [*SSE_HEADERS, request_id_header(request_id)]})
                # The body has been read: the next message can only be the client leaving.
                listener = asyncio.ensure_future(receive())
                listener.set_name(LISTENER_TASK_NAME)  # one string for every stream's listener
                listener.add_done_callback(run.client_left)
                try:
                    # Every frame that is ready goes out in one write; a ping after a silent interval.
                    while True:
                        batch = run.take_ready()
                        if batch is None:
                            streams.silent(run)
                            await run.ready()
                            batch = run.take_ready()
                            if batch is None:  # woken for a keepalive: silent for a whole interval
                                await send({"type": "http.response.body", "body": PING_FRAME, "more_body": True})
                                continue
                        if not batch:
                            break
                        body = batch[0] if len(batch) == 1 else b"".join(batch)
                        await send({"type": "http.response.body", "body": body, "more_body": True})
                    await send({"type": "http.response.body", "body": b"", "more_body": False})
                except OSError:
                    pass  # the client is gone (servers that raise on a send after a disconnect)
                finally:
                    listener.cancel()
            finally:
                run.reader_left()
                streams.discard(run)
        except ClientGone:
            pass
        except BaseException:
            if status == CLIENT_CLOSED_REQUEST:
                status = 500
            raise
        finally:
            if counted:
                gate.leave()
            log_request(scope, request_id, status, started, stats, self.agent.name)

    def _start(self, request: Request, stats: RunStats) -> Run[bytes]:
        """The run for `request`, watched with the other open streams."""
        agent = self.agent
        session = Session(request.session) if request.session is not None else Session.new(agent.name)
        # No timer of its own: the open streams' watcher keeps the time limit.
        run = Run(agent, session, request.query, timeout=None, stats=stats, make_hook=SseHook)
        self.streams.add(run)
        return run

    async def _read_request(self, scope: Scope, receive: Receive) -> Request | Refusal:
        """The parsed request, or the refusal to send instead (413, 400, 422)."""
        body = await read_body(scope, receive, self._max_body_bytes)
        if isinstance(body, Refusal):
            return body
        return parse_request(body, Headers(scope=scope).get("content-type"))
