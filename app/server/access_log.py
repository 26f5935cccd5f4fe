"""One log line per request, and the request id that ties it to the response and its errors."""

from __future__ import annotations

import logging
import time

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.runtime.run import RunStats
from app.server import metrics
from app.server.request_id import REQUEST_ID_HEADER, request_id_from

logger = logging.getLogger("app.access")
_HEADER = REQUEST_ID_HEADER.lower().encode()
CLIENT_CLOSED_REQUEST = 499


def request_id_of(scope: Scope) -> str:
    """The caller's `X-Request-ID` when it is a sane token, else a fresh ULID."""
    return request_id_from(Headers(scope=scope).get(REQUEST_ID_HEADER))


def request_id_header(request_id: str) -> tuple[bytes, bytes]:
    return (_HEADER, request_id.encode())


def log_request(
    scope: Scope, request_id: str, status: int, started: float,
    stats: RunStats | None = None, agent_name: str | None = None,
) -> None:
    """The request's line (status, and for a stream its events and outcome) and its metrics.

    Never logs bodies, prompts, event contents or headers.
    """
    fields = {"request_id": request_id, "method": scope["method"], "path": scope["path"], "status": status}
    if stats is not None:
        metrics.observe_stream(stats)
        fields.update(agent=agent_name, events=stats.events, outcome=stats.outcome)
    fields["duration_ms"] = round((time.perf_counter() - started) * 1000, 1)
    metrics.count_response(status)
    logger.info("request", extra={"fields": fields})


class AccessLogMiddleware:
    """Takes `X-Request-ID` (or makes one), echoes it, and logs each request (but POST /assist,
    which logs its own: see app/server/assist.py)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        request_id = request_id_of(scope)
        scope.setdefault("state", {})["request_id"] = request_id
        id_header = request_id_header(request_id)
        status: int | None = None

        async def send_with_request_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = [(k, v) for k, v in message.get("headers", ()) if k != _HEADER]
                headers.append(id_header)
                message = {**message, "headers": headers}
            await send(message)

        failed = False
        try:
            await self.app(scope, receive, send_with_request_id)
        except BaseException:
            failed = True
            raise
        finally:
            if status is None:
                # No response started: a failure of ours (500), or a client that left first (499, as nginx logs it).
                status = 500 if failed else CLIENT_CLOSED_REQUEST
            log_request(scope, request_id, status, started)
