"""The service with POST /assist answered by three response classes, for bench/response_classes.py.

    uvicorn --factory bench.response_class_apps:ours            EventStream (sentient_assist/server/event_stream.py)
    uvicorn --factory bench.response_class_apps:fastapi_sse     fastapi.sse.EventSourceResponse
    uvicorn --factory bench.response_class_apps:sse_starlette   sse_starlette.EventSourceResponse

and, for `--batched`, `sse_starlette_batched`: the same, but each batch of ready frames
joined into one bytes item (one send per batch, as ours does), to tell how much of
sse-starlette's cost per event is one send per event.

Each factory is `sentient_assist.server.create_app()` (settings and agent from the environment, as
the service reads them) with only the /assist route swapped: the variant's route takes
the original's place in its router, so routing, middleware, the key check,
ASSIST_MAX_STREAMS, the body limit (`AssistRoute`), the request's parsing and validation,
the Run and its hook, the time limit and shutdown (the run is registered with the same
`OpenStreams`), request.state for the access log and the metrics are the same in all
three. What differs is how the run's events get to the client:

    ours           the path operation returns EventStream: one coroutine takes every ready
                   frame and writes them with one ASGI send; a ping after ASSIST_PING_INTERVAL
                   of silence (the shared watcher wakes it); one task waits for the client
                   to leave and cancels the agent.
    fastapi-sse    the path operation is an async generator, `response_class=
                   fastapi.sse.EventSourceResponse`, yielding one `ServerSentEvent(event=...,
                   raw_data=<the event's JSON>)` per event. FastAPI runs the generator in a
                   producer task and a keepalive task (an anyio task group, two memory object
                   streams), encodes each item with `format_sse_event`, and streams the bytes
                   through Starlette's StreamingResponse (itself a task group: the stream, and
                   `listen_for_disconnect` under uvicorn's ASGI 2.3), one send per event.
                   Keepalive: `: ping` after 15 s without an item (`fastapi.sse._PING_INTERVAL`,
                   a module constant, not an option of the route).
    sse-starlette  the path operation returns `sse_starlette.EventSourceResponse` over an async
                   generator of the frames' bytes (sent as they are), one send per frame, in a
                   task group of four tasks per stream: the stream, a ping every
                   `ping` seconds (ASSIST_PING_INTERVAL here; sent whether the stream is silent
                   or not), a shutdown listener, a disconnect listener.

In both variants the Run is made by the generator on its first step, so the agent starts
when streaming does (for FastAPI that is when the path operation returns: its producer
task starts the generator before the response is sent), and the generator's `finally`
cancels the agent when the stream ends early: both libraries notice the client leaving
(a task waiting on `receive()` for `http.disconnect`) and cancel the task that iterates
the generator. For FastAPI that is not enough when the client leaves mid-stream (see
FastApiSseAssist.endpoint): a background task of the response cancels the agent too.
The generators drop their references to the request and the body as soon as they are
used, so a waiting stream holds no more of the request than ours does.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, BackgroundTasks, FastAPI, Request
from fastapi.routing import APIRoute
from fastapi.sse import EventSourceResponse as FastApiEventSourceResponse
from fastapi.sse import ServerSentEvent
from starlette.responses import Response

from sentient_assist.protocol.request import Request as AssistBody
from sentient_assist.runtime.run import Run, RunStats
from sentient_assist.runtime.session import Session
from sentient_assist.server import metrics
from sentient_assist.server.admission import STATE_AGENT, STATE_STATS
from sentient_assist.server.app import create_app
from sentient_assist.server.assist import ASSIST_PATH, AssistFace
from sentient_assist.server.event_stream import SseHook
from sentient_assist.server.request_id import request_id_of
from sentient_assist.server.service import Service

# Since 714ea9a a Run registers itself with its watcher (and is marked silent and gone by
# it); before, the server did that with OpenStreams. Both are handled.
_RUN_TAKES_WATCHER = "watcher" in inspect.signature(Run).parameters
_EVENT_PREFIX = len(b"event: ")
_DATA_SEPARATOR = "\ndata: "


def ours() -> FastAPI:
    """The service as it is."""
    return create_app()


def fastapi_sse() -> FastAPI:
    """POST /assist as an async generator path operation with FastAPI's EventSourceResponse."""
    return _with_assist(FastApiSseAssist)


def sse_starlette() -> FastAPI:
    """POST /assist returning sse-starlette's EventSourceResponse over a generator of frames."""
    return _with_assist(SseStarletteAssist)


def sse_starlette_batched() -> FastAPI:
    """As sse_starlette, but yielding each batch of ready frames as one bytes item."""
    return _with_assist(SseStarletteBatchedAssist)


def _with_assist(variant: type[_VariantAssist]) -> FastAPI:
    """create_app(), with its POST /assist route replaced, in place, by `variant`'s."""
    app = create_app()
    (route,) = variant(app.state.agent, app.state.settings).router().routes
    replaced = _replace_assist_route(app.router, route)
    if replaced != 1:
        raise RuntimeError(f"expected one POST {ASSIST_PATH} route in create_app(), found {replaced}")
    return app


def _replace_assist_route(router: Any, new: APIRoute) -> int:
    """Put `new` where POST /assist is, in `router` or a router included in it; how many were replaced.

    The same place: matching it costs the same as for ours. (FastAPI 0.16x keeps an
    included router as one route of the app's router, `_IncludedRouter`, with the
    router itself as `original_router`; older versions copy its routes in.)
    """
    replaced = 0
    for index, route in enumerate(router.routes):
        if isinstance(route, APIRoute) and route.path == ASSIST_PATH and "POST" in route.methods:
            router.routes[index] = new
            replaced += 1
        elif getattr(route, "original_router", None) is not None:
            replaced += _replace_assist_route(route.original_router, new)
    if replaced and hasattr(router, "_mark_routes_changed"):
        router._mark_routes_changed()  # its cached view of the routes is rebuilt
    return replaced


class _VariantAssist(AssistFace):
    """The /assist face with another response class; everything before the response is the face's own."""

    response_class: type

    def __init__(self, agent: Any, settings: Any) -> None:
        super().__init__(Service(agent, settings))
        self.streams = self.service.streams
        self.ping_interval = settings.ping_interval  # ASSIST_PING_INTERVAL, for sse-starlette's ping
        self._open: dict[Run[bytes], bool] = {}  # the runs not yet ended by _end()

    def router(self, path: str = ASSIST_PATH) -> APIRouter:
        router = APIRouter()
        # The admitted route: the key, ASSIST_MAX_STREAMS, the body limit, as for ours.
        self.add_route(router, path, self.endpoint, name="assist", status_code=200, response_class=self.response_class)
        return router

    def _prepare(self, request: Request, body: AssistBody) -> tuple[Session, RunStats]:
        """What AssistFace.endpoint does before it makes the response (see sentient_assist/server/assist.py)."""
        stats = RunStats(request_id_of(request))
        setattr(request.state, STATE_AGENT, self.agent.name)
        setattr(request.state, STATE_STATS, stats)
        session = Session(body.session) if body.session is not None else Session.new(self.agent.name)
        vars(request).pop("_json", None)
        vars(request).pop("_body", None)
        return session, stats

    def _start(self, session: Session, query: Any, stats: RunStats) -> Run[bytes]:
        """The run, kept by the same OpenStreams as ours (its time limit, shutdown).

        The generators below wait on it as EventStream does; when the watcher wakes a silent
        stream for a keepalive they go back to waiting: the response class pings on its own.
        """
        if _RUN_TAKES_WATCHER:
            run = Run(self.agent, session, query, watcher=self.streams, stats=stats, make_hook=SseHook)
        else:
            run = Run(self.agent, session, query, timeout=None, stats=stats, make_hook=SseHook)
            self.streams.add(run)
        self._open[run] = True
        return run

    def _ready(self, run: Run[bytes]) -> Any:
        """run.ready(); the run is marked silent on the way (by Run itself, or here)."""
        if not _RUN_TAKES_WATCHER:
            self.streams.silent(run)
        return run.ready()

    def _end(self, run: Run[bytes]) -> None:
        """The stream has ended: the agent is cancelled if it still runs (the client left), and
        the run's counts go to the metrics. The first call does it; later ones do nothing."""
        if self._open.pop(run, None) is None:
            return
        run.reader_left()
        if not _RUN_TAKES_WATCHER:
            self.streams.discard(run)
        metrics.observe_stream(run.stats)


class FastApiSseAssist(_VariantAssist):
    response_class = FastApiEventSourceResponse

    async def endpoint(  # type: ignore[override]
        self, request: Request, body: AssistBody, background: BackgroundTasks
    ) -> AsyncIterator[ServerSentEvent]:
        """The agent's answer to the query, one ServerSentEvent per event."""
        session, stats = self._prepare(request, body)
        run = self._start(session, body.query, stats)
        # The generator's `finally` is not enough: when the client leaves while FastAPI's
        # producer task waits to hand an item on, that task is cancelled with the generator
        # suspended at its `yield`, and an exception's traceback (BrokenResourceError, from
        # the keepalive task) keeps it alive until the cyclic GC finalizes it, seconds to
        # minutes later, the agent running on meanwhile. The response's background task
        # runs as soon as StreamingResponse has ended, disconnect included; whichever of
        # the two comes first ends the run.
        background.add_task(self._end, run)
        del request, body, session, background  # not held by the generator's frame for the stream's life
        try:
            while True:
                batch = run.take_ready()
                if batch is None:
                    await self._ready(run)
                    continue
                if not batch:
                    return
                for frame in batch:
                    # b"event: NAME\ndata: JSON\n\n" -> NAME, JSON; FastAPI writes the frame again
                    name, _, data = frame[_EVENT_PREFIX:-2].decode().partition(_DATA_SEPARATOR)
                    yield ServerSentEvent(event=name, raw_data=data)
        finally:
            self._end(run)


class SseStarletteAssist(_VariantAssist):
    # The route's default class; unused: the path operation returns its response itself
    # (sse_starlette is imported only when serving: on import it patches uvicorn's Server).
    response_class = Response

    async def endpoint(self, request: Request, body: AssistBody) -> Any:  # type: ignore[override]
        """The agent's answer to the query, as sse-starlette's EventSourceResponse."""
        from sse_starlette import EventSourceResponse  # imported here: it patches uvicorn's Server.handle_exit

        session, stats = self._prepare(request, body)
        return EventSourceResponse(
            self._frames(session, body.query, stats),
            ping=self.ping_interval,
            sep="\n",  # its pings end in a blank line like our frames
        )

    async def _frames(self, session: Session, query: Any, stats: RunStats) -> AsyncIterator[bytes]:
        """Each frame's bytes (sent as they are); the run starts on the first step, when
        EventSourceResponse starts streaming, after the response headers are sent."""
        run = self._start(session, query, stats)
        del session, query
        try:
            while True:
                batch = run.take_ready()
                if batch is None:
                    await self._ready(run)
                    continue
                if not batch:
                    return
                for frame in batch:
                    yield frame
        finally:
            self._end(run)


class SseStarletteBatchedAssist(SseStarletteAssist):
    async def _frames(self, session: Session, query: Any, stats: RunStats) -> AsyncIterator[bytes]:
        """The frames that were ready together, joined: one item, so one send, per batch."""
        run = self._start(session, query, stats)
        del session, query
        try:
            while True:
                batch = run.take_ready()
                if batch is None:
                    await self._ready(run)
                    continue
                if not batch:
                    return
                yield batch[0] if len(batch) == 1 else b"".join(batch)
        finally:
            self._end(run)
