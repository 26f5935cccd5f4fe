"""HTTP routes: POST /assist (the SSE stream), GET /healthz, /readyz and /metrics."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, PlainTextResponse
from sse_starlette import EventSourceResponse

from app.protocol.request import Request as AssistBody
from app.runtime.session import Session
from app.server.draining import is_draining
from app.server.metrics import metrics_endpoint
from app.runtime.run import RunStats
from app.server.streaming import ShutdownSignal, sse_frames

router = APIRouter()

# Seconds a stream gets, once its shutdown grace is over, to send its last `error` and `done`.
_SHUTDOWN_FLUSH_SECONDS = 2.0

_STREAM_DESCRIPTION = """\
A Server-Sent Events stream. Each event is one frame: `event: <event_name>`, one
`data:` line holding the event as compact JSON, and a blank line. Keepalive pings
are comment lines (`: ping`). The last event is always `done`.
"""


@router.post(
    "/assist",
    summary="Ask the agent; stream its answer",
    response_class=EventSourceResponse,
    responses={
        200: {"description": _STREAM_DESCRIPTION, "content": {"text/event-stream": {}}},
        400: {"description": "The body cannot be parsed at all (not UTF-8, nested past the parser's limits)."},
        401: {"description": "ASSIST_API_KEYS is set and the request has no valid `Authorization: Bearer` key."},
        413: {"description": "The body is larger than ASSIST_MAX_BODY_BYTES."},
        422: {"description": "The body is not a valid request; `detail` names each bad field."},
        503: {"description": "At ASSIST_MAX_STREAMS, or shutting down; see `Retry-After`."},
    },
)
async def assist(body: AssistBody, request: Request) -> EventSourceResponse:
    state = request.app.state
    agent = state.agent
    settings = state.settings
    stats = RunStats(request.state.request_id)
    request.state.stream_stats = stats
    session = Session(body.session) if body.session is not None else Session.new(agent.name)
    shutdown = ShutdownSignal(settings.shutdown_grace)
    frames = sse_frames(
        agent, session, body.query, timeout=settings.request_timeout, stats=stats,
        ping_interval=settings.ping_interval, shutdown=shutdown,
    )
    return EventSourceResponse(
        frames,
        ping=0,  # sse_frames pings when the stream is idle
        sep="\n",
        shutdown_event=shutdown,  # type: ignore[arg-type]
        shutdown_grace_period=settings.shutdown_grace + _SHUTDOWN_FLUSH_SECONDS,
    )


@router.get("/healthz", summary="Liveness: the process answers")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz", summary="Readiness: 503 while draining for shutdown")
async def readyz() -> JSONResponse:
    if is_draining():
        return JSONResponse({"status": "draining"}, status_code=503)
    return JSONResponse({"status": "ready"})


router.add_api_route(
    "/metrics", metrics_endpoint, methods=["GET"], summary="Prometheus metrics", response_class=PlainTextResponse
)
