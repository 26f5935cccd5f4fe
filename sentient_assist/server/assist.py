"""POST /assist: the face of Sentient's wire protocol, a FastAPI path operation that answers
with the agent's run as an event stream.

    request -> the app's middleware -> FastAPI's router -> the admitted route
    (server/admission.py) -> FastAPI reads and validates the body (400/422) and runs the
    dependencies -> `AssistFace.endpoint` -> EventStream (or, with resumable runs, its
    resumable twin)

The body's history is checked without building its models, and kept compact
(sentient_assist/protocol/history.py): the models of a past turn are built only if the agent
reads it. What the histories of all open streams hold together is bounded by
ASSIST_MAX_HISTORY_BYTES_TOTAL (server/history_budget.py: past it, 503).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from starlette.responses import Response

from sentient_assist.protocol.history import CompactRequest, History
from sentient_assist.runtime.session import Session
from sentient_assist.server.event_stream import MEDIA_TYPE, EventStream
from sentient_assist.server.face import Face

ASSIST_PATH = "/assist"
_STREAM_DESCRIPTION = """\
A Server-Sent Events stream. Each event is one frame: `event: <event_name>`, one
`data:` line holding the event as compact JSON, and a blank line. Keepalive pings
are comment lines (`: ping`). The last event is always `done`.
"""
# One SSE event of the stream, in the shape OpenAPI 3.2 gives server-sent events.
_SSE_EVENT_SCHEMA = {
    "type": "object",
    "properties": {
        "event": {"type": "string", "description": "The event's `event_name`."},
        "data": {"type": "string", "contentMediaType": "application/json", "description": "The event, as JSON."},
    },
    "required": ["event", "data"],
}
RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"content": {MEDIA_TYPE: {"itemSchema": _SSE_EVENT_SCHEMA}}},
    400: {"description": "The body is not text in UTF-8, -16 or -32, or nests past the parser's limits."},
    401: {"description": "ASSIST_API_KEYS is set and the request has no valid `Authorization: Bearer` key."},
    408: {"description": "The body did not arrive in full within ASSIST_BODY_TIMEOUT seconds."},
    413: {
        "description": "The body is larger than ASSIST_MAX_BODY_BYTES, or its history alone takes more than"
        " ASSIST_MAX_HISTORY_BYTES_TOTAL."
    },
    422: {"description": "The body is not a valid request; `detail` names each bad field."},
    503: {
        "description": "At ASSIST_MAX_STREAMS, or the open streams' histories at ASSIST_MAX_HISTORY_BYTES_TOTAL,"
        " or shutting down, or (resumable runs with Redis) the key at ASSIST_RUNS_MAX_PER_KEY or"
        " ASSIST_RUNS_MAX_BYTES_PER_KEY; see `Retry-After`."
    },
}


class AssistFace(Face):
    """POST /assist for the agent of a service (and, with resumable runs, /assist/runs)."""

    title = "/assist"

    def router(self, path: str = ASSIST_PATH) -> APIRouter:
        """A router holding POST /assist; include it in any FastAPI app."""
        router = APIRouter()
        self.add_route(
            router,
            path,
            self.endpoint,
            name="assist",
            status_code=200,
            summary="Ask the agent; stream its answer",
            response_class=EventStream,
            response_description=_STREAM_DESCRIPTION,
            responses=RESPONSES,
        )
        runs = self.service.runs
        if runs is not None:
            from sentient_assist.server.runs.routes import runs_router

            router.include_router(runs_router(self.service, runs))
        return router

    async def endpoint(self, request: Request, body: CompactRequest) -> Response:
        """The agent's answer to the query, streamed as Server-Sent Events."""
        service = self.service
        history = body.session.interactions if body.session is not None else None
        if isinstance(history, History):
            service.histories.hold(history)
        agent = self.agent
        session = Session(body.session) if body.session is not None else Session.new(agent.name)
        runs = service.runs
        if runs is not None and await runs.available():
            from sentient_assist.server.runs.stream import ResumableEventStream

            authorization = request.headers.get("authorization")
            handle = await runs.reserve(authorization)  # 503 past the key's quota of runs in Redis
            stats = self.run_stats(request)
            return ResumableEventStream(runs, agent, session, body.query, stats, service.sealer, authorization, handle)
        return EventStream(self.pending_run(request, session, body.query))
