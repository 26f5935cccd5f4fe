"""One log line per request, and the request id that ties it to the response and its errors."""

from __future__ import annotations

import logging
import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.server import metrics
from app.server.request_id import REQUEST_ID_HEADER, request_id_from

logger = logging.getLogger("app.access")
_HEADER = REQUEST_ID_HEADER.lower().encode()
CLIENT_CLOSED_REQUEST = 499


class AccessLogMiddleware:
    """Takes `X-Request-ID` (or makes one), echoes it, and logs status, events and duration.

    Never logs bodies, prompts, event contents or headers.
    """

    def __init__(self, app: ASGIApp, agent_name: str) -> None:
        self.app = app
        self.agent_name = agent_name

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        request_id = request_id_from(_header(scope, _HEADER))
        state = scope.setdefault("state", {})
        state["request_id"] = request_id
        status: int | None = None

        async def send_with_request_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = [(k, v) for k, v in message.get("headers", ()) if k != _HEADER]
                headers.append((_HEADER, request_id.encode()))
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
            fields = {
                "request_id": request_id,
                "method": scope["method"],
                "path": scope["path"],
                "status": status,
            }
            stats = state.get("stream_stats")
            if stats is not None:
                metrics.observe_stream(stats)
                fields.update(agent=self.agent_name, events=stats.events, outcome=stats.outcome)
            fields["duration_ms"] = round((time.perf_counter() - started) * 1000, 1)
            metrics.count_response(status)
            logger.info("request", extra={"fields": fields})


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope["headers"]:
        if key == name:
            return value.decode("latin-1")
    return None
