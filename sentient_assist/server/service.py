"""Service: one served agent and everything its faces share -- its keys, its stream budget, its
body limits, its open runs (time limit, keepalives, shutdown grace), its pause sealer, its
history budget and, when on, its resumable runs. Every face of an app is built on one."""

from __future__ import annotations

import email.message
from typing import TYPE_CHECKING

from fastapi import HTTPException
from starlette.datastructures import Headers
from starlette.types import Receive, Scope

from sentient_assist.runtime.agent import AbstractAgent
from sentient_assist.runtime.pauses import PauseSealer, sealer_for
from sentient_assist.server import metrics
from sentient_assist.server.auth import BearerKeys, key_owner
from sentient_assist.server.callers import Callers
from sentient_assist.server.history_budget import HistoryBudget
from sentient_assist.server.limits import LimitedBody, StreamGate
from sentient_assist.server.open_streams import OpenStreams
from sentient_assist.server.settings import Settings

if TYPE_CHECKING:
    from sentient_assist.server.runs.keeper import DetachedRuns

NOT_JSON = "the body must be JSON, sent with Content-Type: application/json"


class Service:
    """The agent of an app and its limits, as every face of the app serves it."""

    def __init__(self, agent: AbstractAgent, settings: Settings) -> None:
        self.agent = agent
        self.settings = settings
        self.keys = BearerKeys([key.get_secret_value() for key in settings.api_keys])
        self.callers = Callers(settings.cors_origins, settings.allowed_hosts, settings.public_url)
        self.gate = StreamGate(
            settings.max_streams, on_change=metrics.change_open_streams, max_per_owner=streams_per_key(settings)
        )
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

    def owner(self, authorization: str | None) -> str:
        """Whose share of the streams a request takes: its key's, when keys are set ("" else)."""
        return key_owner(authorization) if self.keys else ""

    def check_caller(self, scope: Scope, headers: Headers) -> str | None:
        """Pass a request to a face from an allowed page and host name (403, 421: callers.py)
        with a valid key (401). Returns its `Authorization` header."""
        self.callers.check(scope)
        authorization = headers.get("authorization")
        self.keys.check(authorization)
        return authorization

    async def admit(self, scope: Scope, receive: Receive) -> tuple[LimitedBody, str]:
        """What a request that runs the agent passes before its body is read: its page, host
        name and key (`check_caller`), a body of JSON (415), its turn behind the runs still
        starting (runtime/head_start.py), the body's declared size (413), then a place under
        ASSIST_MAX_STREAMS (503), counted from here so that concurrent requests cannot all pass
        the limit while their bodies are still coming in. The caller leaves `gate` as that owner
        when its answer ends. Returns the body, bounded in size and time, and whose place it took."""
        headers = Headers(scope=scope)
        authorization = self.check_caller(scope, headers)
        if scope["method"] == "POST" and not declares_json(headers.get("content-type")):
            raise HTTPException(415, NOT_JSON)
        await self.streams.head_start.turn()
        body = LimitedBody(receive, self.max_body_bytes, self.body_timeout)
        body.check_declared(headers)
        owner = self.owner(authorization)
        self.gate.enter(owner)
        return body, owner


def declares_json(content_type: str | None) -> bool:
    """Whether a request's body is JSON by its content type, as FastAPI (strict) reads one:
    application/json or application/*+json, in any case, with any parameters."""
    if not content_type:
        return False
    message = email.message.Message()
    message["content-type"] = content_type
    subtype = message.get_content_subtype()
    return message.get_content_maintype() == "application" and (subtype == "json" or subtype.endswith("+json"))


def streams_per_key(settings: Settings) -> int | None:
    """ASSIST_MAX_STREAMS_PER_KEY; unset, half of ASSIST_MAX_STREAMS once two keys or more are set
    (one key alone has no other to crowd out); None: no share."""
    if settings.max_streams_per_key is not None:
        return settings.max_streams_per_key
    if len(settings.api_keys) >= 2:
        return max(1, settings.max_streams // 2)
    return None


def service_sealer(settings: Settings) -> PauseSealer:
    """The sealer of a service built with `settings`: its ASSIST_RESUME_SECRET and ASSIST_RESUME_TTL;
    with ASSIST_REDIS_URL, its pauses are answered once across the replicas sharing that Redis."""
    secret = settings.resume_secret.get_secret_value().encode() if settings.resume_secret else None
    answered = None
    if settings.redis_url is not None:
        from sentient_assist.server.answered_pauses import RedisAnsweredPauses

        answered = RedisAnsweredPauses(settings.redis_url.get_secret_value())
    return sealer_for(secret, settings.resume_ttl, answered)
