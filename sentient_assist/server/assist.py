"""POST /assist: a FastAPI path operation that answers with the agent's run as an event stream.

    request -> the app's middleware -> FastAPI's router -> AssistRoute: the key (401), a place
    under ASSIST_MAX_STREAMS (503), the body's size (413) -> FastAPI reads and validates the
    body (400/422) and runs the dependencies -> `Assist.endpoint` -> EventStream

The first three are checked before FastAPI reads the body, so a client without a key
never holds a stream's place, and none can make the service read more than the limit.

The body's history is checked without building its models, and kept compact
(sentient_assist/protocol/history.py): the models of a past turn are built only if the agent
reads it. What the histories of all open streams hold together is bounded by
ASSIST_MAX_HISTORY_BYTES_TOTAL (`HistoryBudget`: past it, 503).
"""

from __future__ import annotations

import email.message
import json
import threading
import weakref
from collections.abc import Callable, Coroutine
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

import orjson
from fastapi import APIRouter, HTTPException, Request, Security
from fastapi.params import Depends
from fastapi.routing import APIRoute
from starlette.datastructures import Headers
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from sentient_assist.protocol.history import CompactRequest, History, collector_paused
from sentient_assist.runtime.agent import AbstractAgent
from sentient_assist.runtime.pauses import PauseSealer, sealer_for
from sentient_assist.runtime.run import RunStats
from sentient_assist.runtime.session import Session
from sentient_assist.server import metrics
from sentient_assist.server.auth import BEARER_SCHEME, BearerKeys
from sentient_assist.server.event_stream import MEDIA_TYPE, EventStream
from sentient_assist.server.limits import RETRY_AFTER_SECONDS, LimitedBody, StreamGate
from sentient_assist.server.open_streams import OpenStreams
from sentient_assist.server.request_id import request_id_of
from sentient_assist.server.settings import Settings

if TYPE_CHECKING:
    from sentient_assist.server.runs.keeper import DetachedRuns

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
    413: {
        "description": "The body is larger than ASSIST_MAX_BODY_BYTES, or its history alone takes more than"
        " ASSIST_MAX_HISTORY_BYTES_TOTAL."
    },
    422: {"description": "The body is not a valid request; `detail` names each bad field."},
    503: {
        "description": "At ASSIST_MAX_STREAMS, or the open streams' histories at ASSIST_MAX_HISTORY_BYTES_TOTAL,"
        " or shutting down; see `Retry-After`."
    },
}
HISTORY_SETTING = "ASSIST_MAX_HISTORY_BYTES_TOTAL"


class HistoryBudget:
    """What the histories of a service's open streams hold together (their compact bytes,
    `History.nbytes`), up to ASSIST_MAX_HISTORY_BYTES_TOTAL. A history is counted from the
    moment its stream is admitted until it is freed (the stream has ended and nothing holds
    it): what is counted is what is held. Past the limit a request with a history gets a 503
    naming the setting, with `Retry-After`; a history larger than the limit by itself, a 413."""

    __slots__ = ("limit", "held", "_lock")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held = 0
        self._lock = threading.Lock()

    def hold(self, history: History) -> None:
        """Count `history` until it is freed, or raise the 503 (413) that says why not."""
        size = history.nbytes
        if size > self.limit:
            raise HTTPException(
                413, f"the request's history takes {size} bytes, more than {HISTORY_SETTING} ({self.limit} bytes)"
            )
        with self._lock:
            if self.held + size > self.limit:
                raise HTTPException(
                    503,
                    f"the histories of the open streams are at {HISTORY_SETTING} ({self.limit} bytes); retry shortly",
                    {"Retry-After": RETRY_AFTER_SECONDS},
                )
            self.held += size
        weakref.finalize(history, self._free, size)

    def _free(self, size: int) -> None:
        with self._lock:
            self.held -= size


# The budget of the service whose route admitted the request being answered (set by
# `Assist.admit`): the OpenAI face's conversation_of counts the history it makes in it.
CURRENT_HISTORY_BUDGET: ContextVar[HistoryBudget | None] = ContextVar("assist_history_budget", default=None)


def hold_history(history: History) -> None:
    """Count `history` in the budget of the request being answered, if it has one."""
    budget = CURRENT_HISTORY_BUDGET.get()
    if budget is not None:
        budget.hold(history)


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
        self.histories = HistoryBudget(settings.max_history_bytes_total)
        # ASSIST_DETACH_GRACE > 0: runs outlive their connection (docs/resumable.md); else None, and
        # /assist is exactly as without the feature.
        self.runs: DetachedRuns | None = None
        if settings.detach_grace > 0:
            from sentient_assist.server.runs.keeper import DetachedRuns

            self.runs = DetachedRuns(settings, self.gate, self.streams)

    async def admit(self, headers: Headers, receive: Receive) -> LimitedBody:
        """What a request that runs the agent passes before its body is read: the key (401),
        its turn behind the runs still starting (runtime/head_start.py), the body's declared
        size (413), then a place under ASSIST_MAX_STREAMS (503), counted from here so that
        concurrent requests cannot all pass the limit while their bodies are still coming in.
        The caller leaves `gate` when its answer ends. Returns the body, bounded in size and time."""
        self.keys.check(headers.get("authorization"))
        await self.streams.head_start.turn()
        body = LimitedBody(receive, self.max_body_bytes, self.body_timeout)
        body.check_declared(headers)
        self.gate.enter()
        CURRENT_HISTORY_BUDGET.set(self.histories)
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
        if self.runs is not None:
            from sentient_assist.server.runs.routes import runs_router

            router.include_router(runs_router(self, self.runs))
        return router

    async def endpoint(self, request: Request, body: CompactRequest) -> Response:
        """The agent's answer to the query, streamed as Server-Sent Events."""
        history = body.session.interactions if body.session is not None else None
        if isinstance(history, History):
            self.histories.hold(history)
        agent = self.agent
        stats = RunStats(request_id_of(request))
        setattr(request.state, STATE_AGENT, agent.name)
        setattr(request.state, STATE_STATS, stats)
        session = Session(body.session) if body.session is not None else Session.new(agent.name)
        # The request object lives as long as the stream; the bytes and the JSON it cached on
        # the way to `body` are not needed again: the run holds the session, its history compact.
        vars(request).pop("_json", None)
        vars(request).pop("_body", None)
        if self.runs is not None and await self.runs.available():
            from sentient_assist.server.runs.stream import ResumableEventStream

            authorization = request.headers.get("authorization")
            return ResumableEventStream(self.runs, agent, session, body.query, stats, self.sealer, authorization)
        return EventStream(agent, session, body.query, stats, self.streams, sealer=self.sealer)


def service_sealer(settings: Settings) -> PauseSealer:
    """The sealer of a service built with `settings`: its ASSIST_RESUME_SECRET and ASSIST_RESUME_TTL;
    with ASSIST_REDIS_URL, its pauses are answered once across the replicas sharing that Redis."""
    secret = settings.resume_secret.get_secret_value().encode() if settings.resume_secret else None
    answered = None
    if settings.redis_url is not None:
        from sentient_assist.server.answered_pauses import RedisAnsweredPauses

        answered = RedisAnsweredPauses(settings.redis_url.get_secret_value())
    return sealer_for(secret, settings.resume_ttl, answered)


class AssistRoute(APIRoute):
    """The route of `Assist.endpoint`: a request passes the key check and takes a place under
    ASSIST_MAX_STREAMS (until its stream ends), and its body is bounded, before FastAPI reads
    it. Everything else is FastAPI's own: middleware, dependencies, exception handlers and
    the OpenAPI schema apply as to any path operation."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def read_json_with_the_collector_paused(request: Request) -> Response:
            # FastAPI reads a JSON body with `await request.json()` (json.loads, cached by the
            # request). Read here first into the same objects (`json_of`), with the garbage
            # collector paused (protocol/history.py): a 1 MB history is 100,000 objects, and
            # the collections its parse would set off cost more than the parse. A body FastAPI
            # would not read as JSON, or that json.loads refuses, is left to FastAPI to answer for.
            if _is_json(request.headers.get("content-type")):
                try:
                    raw = await request.body()
                except HTTPException:
                    raise
                except Exception:
                    return await handler(request)
                if raw:
                    try:
                        with collector_paused():
                            vars(request)["_json"] = json_of(raw)
                    except Exception:
                        pass
            return await handler(request)

        return read_json_with_the_collector_paused

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["method"] not in (self.methods or ()):
            await super().handle(scope, receive, send)  # FastAPI's 405
            return
        assist: Assist = self.endpoint.__self__  # type: ignore[attr-defined]
        body = await assist.admit(Headers(scope=scope), receive)
        try:
            await super().handle(scope, body, send)
        finally:
            assist.gate.leave()


def _is_json(content_type: str | None) -> bool:
    """Whether FastAPI reads a body of this content type as JSON (its own test)."""
    if not content_type:
        return False
    message = email.message.Message()
    message["content-type"] = content_type
    subtype = message.get_content_subtype()
    return message.get_content_maintype() == "application" and (subtype == "json" or subtype.endswith("+json"))


# orjson reads an integer past 64 bits as a float, where json.loads keeps it whole: a run of
# 19 digits or more, found as 19 zeros once every digit is a zero (in C: a regular expression
# takes 10 times as long).
_DIGITS_AS_ZEROS = bytes.maketrans(b"0123456789", b"0" * 10)
_LONG_NUMBER = b"0" * 19


def json_of(raw: bytes) -> Any:
    """`json.loads(raw)`, as Starlette's `request.json()` reads a body, in about half the
    time when orjson can tell: it refuses what json.loads reads otherwise (NaN, a lone
    surrogate, a BOM, UTF-16, nesting past 1,024, a float past its range), and a run of 19
    digits, where it would read an integer other than json.loads does, is left to json.loads."""
    if raw.translate(_DIGITS_AS_ZEROS).find(_LONG_NUMBER) < 0:
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass
    return json.loads(raw)
