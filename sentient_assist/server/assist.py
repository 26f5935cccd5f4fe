"""POST /assist: a FastAPI path operation that answers with the agent's run as an event stream.

    request -> the app's middleware -> FastAPI's router -> AssistRoute: the key (401), a place
    under ASSIST_MAX_STREAMS (503), the body's size (413) -> FastAPI reads and validates the
    body (400/422) and runs the dependencies -> `Assist.endpoint` -> EventStream

The first three are checked before FastAPI reads the body, so a client without a key
never holds a stream's place, and none can make the service read more than the limit.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Security
from fastapi.params import Depends
from fastapi.routing import APIRoute
from starlette.datastructures import Headers
from starlette.types import Receive, Scope, Send

from sentient_assist.protocol.request import Request as AssistBody
from sentient_assist.runtime.agent import AbstractAgent
from sentient_assist.runtime.pauses import PauseSealer, sealer_for
from sentient_assist.runtime.run import RunStats
from sentient_assist.runtime.session import Session
from sentient_assist.server import metrics
from sentient_assist.server.auth import BEARER_SCHEME, BearerKeys
from sentient_assist.server.event_stream import MEDIA_TYPE, EventStream
from sentient_assist.server.limits import LimitedBody, StreamGate
from sentient_assist.server.open_streams import OpenStreams
from sentient_assist.server.request_id import request_id_of
from sentient_assist.server.settings import Settings

ASSIST_PATH = "/assist"
# Where the access log finds a stream's agent and counts (request.state is scope["state"]).
STATE_AGENT, STATE_STATS = "assist_agent", "assist_stats"

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
    413: {"description": "The body is larger than ASSIST_MAX_BODY_BYTES."},
    422: {"description": "The body is not a valid request; `detail` names each bad field."},
    503: {"description": "At ASSIST_MAX_STREAMS, or shutting down; see `Retry-After`."},
}


class Assist:
    """POST /assist for one agent and its settings: its limits, its open streams, its pause
    sealer, its router and the path operation."""

    def __init__(self, agent: AbstractAgent, settings: Settings) -> None:
        self.agent = agent
        self.keys = BearerKeys([key.get_secret_value() for key in settings.api_keys])
        self.gate = StreamGate(settings.max_streams, on_change=metrics.change_open_streams)
        self.max_body_bytes = settings.max_body_bytes
        self.body_timeout = settings.body_timeout
        self.streams = OpenStreams(
            ping_interval=settings.ping_interval, time_limit=settings.request_timeout, grace=settings.shutdown_grace
        )
        self.sealer = service_sealer(settings)

    def admit(self, headers: Headers, receive: Receive) -> LimitedBody:
        """What a request that runs the agent passes before its body is read: the key (401),
        the body's declared size (413), then a place under ASSIST_MAX_STREAMS (503), counted
        from here so that concurrent requests cannot all pass the limit while their bodies are
        still coming in. The caller leaves `gate` when its answer ends. Returns the body,
        bounded in size and time."""
        self.keys.check(headers.get("authorization"))
        body = LimitedBody(receive, self.max_body_bytes, self.body_timeout)
        body.check_declared(headers)
        self.gate.enter()
        return body

    def router(self) -> APIRouter:
        """A router holding POST /assist; include it in any FastAPI app."""
        router = APIRouter()
        # With keys, OpenAPI shows the bearer scheme (and /docs its Authorize button); the key
        # itself is checked by AssistRoute, before the body is read.
        security: list[Depends] = [Security(BEARER_SCHEME)] if self.keys else []
        router.add_api_route(
            ASSIST_PATH,
            self.endpoint,
            methods=["POST"],
            name="assist",
            status_code=200,
            summary="Ask the agent; stream its answer",
            response_class=EventStream,
            response_description=_STREAM_DESCRIPTION,
            responses=RESPONSES,
            dependencies=security,
            route_class_override=AssistRoute,
        )
        return router

    async def endpoint(self, request: Request, body: AssistBody) -> EventStream:
        """The agent's answer to the query, streamed as Server-Sent Events."""
        agent = self.agent
        stats = RunStats(request_id_of(request))
        setattr(request.state, STATE_AGENT, agent.name)
        setattr(request.state, STATE_STATS, stats)
        session = Session(body.session) if body.session is not None else Session.new(agent.name)
        # The request object lives as long as the stream; the bytes and the JSON it cached on
        # the way to `body` are not needed again: the run holds the models it uses.
        vars(request).pop("_json", None)
        vars(request).pop("_body", None)
        return EventStream(agent, session, body.query, stats, self.streams, sealer=self.sealer)


def service_sealer(settings: Settings) -> PauseSealer:
    """The sealer of a service built with `settings`: its ASSIST_RESUME_SECRET and ASSIST_RESUME_TTL."""
    secret = settings.resume_secret.get_secret_value().encode() if settings.resume_secret else None
    return sealer_for(secret, settings.resume_ttl)


class AssistRoute(APIRoute):
    """The route of `Assist.endpoint`: a request passes the key check and takes a place under
    ASSIST_MAX_STREAMS (until its stream ends), and its body is bounded, before FastAPI reads
    it. Everything else is FastAPI's own: middleware, dependencies, exception handlers and
    the OpenAPI schema apply as to any path operation."""

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["method"] not in (self.methods or ()):
            await super().handle(scope, receive, send)  # FastAPI's 405
            return
        assist: Assist = self.endpoint.__self__  # type: ignore[attr-defined]
        body = assist.admit(Headers(scope=scope), receive)
        try:
            await super().handle(scope, body, send)
        finally:
            assist.gate.leave()
