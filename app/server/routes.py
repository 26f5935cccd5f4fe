"""HTTP routes: POST /assist (the SSE stream) and GET /healthz."""

from __future__ import annotations

from fastapi import APIRouter, Request
from sse_starlette import EventSourceResponse, ServerSentEvent

from app.protocol.request import Request as AssistBody
from app.runtime.session import Session
from app.server.request_id import REQUEST_ID_HEADER, request_id_from
from app.server.streaming import ShutdownSignal, sse_frames

router = APIRouter()

_PING = ServerSentEvent(comment="ping", sep="\n")
# Seconds a stream gets, once the server is stopping, to send its last `error` and `done`.
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
        422: {"description": "The body is not a valid request; `detail` names each bad field."},
    },
)
async def assist(body: AssistBody, request: Request) -> EventSourceResponse:
    state = request.app.state
    agent = state.agent
    settings = state.settings
    request_id = request_id_from(request.headers.get(REQUEST_ID_HEADER))
    session = Session(body.session) if body.session is not None else Session.new(agent.name)
    shutdown = ShutdownSignal(request_id)
    frames = sse_frames(
        agent, session, body.query, timeout=settings.request_timeout, request_id=request_id, shutdown=shutdown
    )
    return EventSourceResponse(
        frames,
        headers={REQUEST_ID_HEADER: request_id},
        ping=settings.ping_interval,
        ping_message_factory=lambda: _PING,
        sep="\n",
        shutdown_event=shutdown,  # type: ignore[arg-type]
        shutdown_grace_period=_SHUTDOWN_FLUSH_SECONDS,
    )


@router.get("/healthz", summary="Liveness: the process answers")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}
