"""One log line per request, and the request id that ties it to the response and its errors."""

from __future__ import annotations

import logging
import time
from typing import Any

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from sentient_assist.runtime.run import RunStats
from sentient_assist.server import metrics
from sentient_assist.server.admission import STATE_AGENT, STATE_STATS
from sentient_assist.server.limits import CLIENT_CLOSED_REQUEST
from sentient_assist.server.request_id import REQUEST_ID_HEADER, STATE_REQUEST_ID, request_id_from

logger = logging.getLogger("sentient_assist.access")
_HEADER = REQUEST_ID_HEADER.lower().encode()
NO_RUN = "no_run"  # the outcome of a request a face answered without running the agent


class AccessLogMiddleware:
    """Takes `X-Request-ID` (or makes one), echoes it on the response, and logs each request
    once it has ended: for a stream, with its agent, its number of events and how it ended.

    Never logs bodies, prompts, event contents or headers.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        request_id = request_id_from(Headers(scope=scope).get(REQUEST_ID_HEADER))
        state = scope.setdefault("state", {})
        state[STATE_REQUEST_ID] = request_id
        id_header = (_HEADER, request_id.encode())
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
            _log(scope, request_id, status, started, state)


def _log(scope: Scope, request_id: str, status: int, started: float, state: dict[str, Any]) -> None:
    fields: dict[str, Any] = {
        "request_id": request_id,
        "method": scope["method"],
        "path": scope["path"],
        "status": status,
    }
    agent = state.get(STATE_AGENT)  # a request a face admitted
    if agent is not None:
        stats: RunStats | None = state.get(STATE_STATS)
        if stats is None:  # answered without a run of the agent: MCP's tools/list, A2A's GetTask
            fields.update(agent=agent, events=0, outcome=NO_RUN)
        else:
            fields.update(agent=agent, events=stats.events, outcome=stats.outcome)
    fields["duration_ms"] = round((time.perf_counter() - started) * 1000, 1)
    metrics.count_response(status)
    logger.info("request", extra={"fields": fields})
