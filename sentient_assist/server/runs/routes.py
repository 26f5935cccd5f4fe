"""GET /assist/runs/<handle> (resume: the run's events after Last-Event-ID, then the live rest)
and DELETE /assist/runs/<handle> (stop it), under the keys of /assist and its ASSIST_MAX_STREAMS.

A handle answers only to the key that started its run: any other key (or none, when keys are
set) is told the handle is unknown (404), as for a handle never made or no longer kept.
"""

from __future__ import annotations

import hmac
import re
from functools import partial
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, HTTPException, Request, Security
from fastapi.params import Depends
from starlette.responses import Response

from sentient_assist.protocol.ulid import is_ulid
from sentient_assist.runtime.errors import StoreUnavailable, UnknownEventId
from sentient_assist.server.auth import BEARER_SCHEME
from sentient_assist.server.event_stream import MEDIA_TYPE
from sentient_assist.server.face import CALLER_RESPONSES
from sentient_assist.server.runs.buffer import SharedRun
from sentient_assist.server.runs.keeper import DetachedRuns
from sentient_assist.server.runs.kept import KeptRun
from sentient_assist.server.runs.source import FrameSource, LocalSource
from sentient_assist.server.runs.stream import ResumedStream

if TYPE_CHECKING:
    from sentient_assist.server.service import Service

RUNS_PATH = "/assist/runs"
LAST_EVENT_ID = "last-event-id"
# What a handle can be (secrets.token_urlsafe's alphabet); anything else is unknown without a lookup.
_HANDLE = re.compile(r"[A-Za-z0-9_-]{16,64}")
UNKNOWN = "no run is kept under this handle (unknown, ended past ASSIST_RUN_RETENTION, or another key's)"
BAD_CURSOR = "Last-Event-ID is not the id of an event of this run"
STORE_DOWN = "the run cannot be resumed: its buffer (Redis) does not answer ({why})"

_RESPONSES: dict[int | str, dict[str, Any]] = {
    400: {"description": "Last-Event-ID is not the `id` of an event this run sent."},
    401: {"description": "ASSIST_API_KEYS is set and the request has no valid `Authorization: Bearer` key."},
    404: {"description": UNKNOWN},
    503: {"description": "At ASSIST_MAX_STREAMS, shutting down, or the run's buffer (Redis) does not answer."},
}


def runs_router(assist: Service, runs: DetachedRuns) -> APIRouter:
    router = APIRouter()
    security: list[Depends] = [Security(BEARER_SCHEME)] if assist.keys else []

    async def resume(request: Request, handle: str) -> Response:
        """The run's events after the one `Last-Event-ID` names (all of them without it), then
        the live rest, ending with `done`: the same frames as its POST /assist stream."""
        authorization = assist.check_caller(request.scope, request.headers)
        after = request.headers.get(LAST_EVENT_ID) or None
        if after is not None and not is_ulid(after.strip()):
            raise HTTPException(400, BAD_CURSOR)
        after = after.strip().upper() if after is not None else None
        owner = assist.owner(authorization)
        assist.gate.enter(owner)
        try:
            kept, shared = await _find(runs, handle, authorization)
            source: FrameSource
            if kept is not None:
                index = kept.index_after(after)
                if index is None:
                    raise HTTPException(400, BAD_CURSOR)
                source = LocalSource(kept, index)
                if not kept.ended:
                    runs.attach(kept)
                else:
                    kept = None
            else:
                assert shared is not None and runs.shared is not None
                try:
                    source = await runs.shared.source(shared, after, runs.ping_interval)
                except UnknownEventId:
                    raise HTTPException(400, BAD_CURSOR) from None
                except StoreUnavailable as exc:
                    raise HTTPException(503, STORE_DOWN.format(why=exc)) from None
        except BaseException:
            assist.gate.leave(owner)
            raise
        return ResumedStream(runs, handle, source, partial(assist.gate.leave, owner), kept)

    async def stop(request: Request, handle: str) -> Response:
        """Stop the run: its streams end with an `error` (499, stopped by its client) and `done`.
        204 once stopped here, or ended already; 202 when its replica is told to stop it."""
        authorization = assist.check_caller(request.scope, request.headers)
        kept, shared = await _find(runs, handle, authorization)
        if kept is not None:
            runs.stop(kept)
            return Response(status_code=204)
        assert shared is not None and runs.shared is not None
        if shared.ended:
            return Response(status_code=204)
        try:
            await runs.shared.request_stop(shared)
        except StoreUnavailable as exc:
            raise HTTPException(503, STORE_DOWN.format(why=exc)) from None
        return Response(status_code=202)

    router.add_api_route(
        RUNS_PATH + "/{handle}",
        resume,
        methods=["GET"],
        name="assist_resume",
        summary="Resume a run: its events after Last-Event-ID, then the live rest",
        response_class=Response,
        responses={200: {"content": {MEDIA_TYPE: {}}}, **_RESPONSES, **CALLER_RESPONSES},
        dependencies=security,
    )
    router.add_api_route(
        RUNS_PATH + "/{handle}",
        stop,
        methods=["DELETE"],
        name="assist_stop",
        summary="Stop a run",
        status_code=204,
        response_class=Response,
        responses={
            202: {"description": "The replica running it is told to stop it."},
            **_RESPONSES,
            **CALLER_RESPONSES,
        },
        dependencies=security,
    )
    return router


async def _find(runs: DetachedRuns, handle: str, authorization: str | None) -> tuple[KeptRun | None, SharedRun | None]:
    """The run of `handle` (this process's, else the shared store's) if the key may see it; else 404."""
    if _HANDLE.fullmatch(handle) is None:
        raise HTTPException(404, UNKNOWN)
    digest = runs.digest_of(handle, authorization)
    kept = runs.local.get(handle)
    if kept is not None:
        if not hmac.compare_digest(kept.key_digest, digest):
            raise HTTPException(404, UNKNOWN)
        return kept, None
    if runs.shared is None:
        raise HTTPException(404, UNKNOWN)
    try:
        shared = await runs.shared.find(handle)
    except StoreUnavailable as exc:
        raise HTTPException(503, STORE_DOWN.format(why=exc)) from None
    if shared is None or not hmac.compare_digest(shared.key_digest, digest):
        raise HTTPException(404, UNKNOWN)
    return None, shared
