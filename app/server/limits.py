"""Resource limits: concurrent streams (503 + Retry-After) and request body size (413)."""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.server.draining import is_draining
from app.server.responses import send_json_error

ASSIST_PATH = "/assist"
RETRY_AFTER_SECONDS = "1"


class StreamGateMiddleware:
    """Counts open /assist streams; past ASSIST_MAX_STREAMS, or while draining, answers 503."""

    def __init__(self, app: ASGIApp, max_streams: int, on_change=None) -> None:
        self.app = app
        self.max_streams = max_streams
        self.open = 0
        self._on_change = on_change or (lambda delta: None)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != ASSIST_PATH or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        if is_draining():
            await send_json_error(
                send, 503, "the server is shutting down; retry on another instance",
                {"Retry-After": RETRY_AFTER_SECONDS},
            )
            return
        if self.open >= self.max_streams:
            await send_json_error(
                send, 503, f"the server is at its limit of {self.max_streams} concurrent streams; retry shortly",
                {"Retry-After": RETRY_AFTER_SECONDS},
            )
            return
        self.open += 1
        self._on_change(1)
        try:
            await self.app(scope, receive, send)
        finally:
            self.open -= 1
            self._on_change(-1)


class BodyLimitMiddleware:
    """Reads a request body up to ASSIST_MAX_BODY_BYTES before the app sees it; past that, 413.

    Content-Length is checked first; a chunked body is counted as it arrives.
    """

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.max_bytes:
            await self._too_large(send)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body = message.get("body", b"")
            size += len(body)
            if size > self.max_bytes:
                await self._too_large(send)
                return
            chunks.append(body)
            if not message.get("more_body", False):
                break
        await self.app(scope, _replay(b"".join(chunks), receive), send)

    async def _too_large(self, send: Send) -> None:
        await send_json_error(send, 413, f"the request body is larger than the limit of {self.max_bytes} bytes")


def _content_length(scope: Scope) -> int | None:
    for name, value in scope["headers"]:
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


def _replay(body: bytes, receive: Receive) -> Receive:
    """The whole body once, then the real receive (which later reports the disconnect)."""
    pending: list[Message] = [{"type": "http.request", "body": body, "more_body": False}]

    async def replayed() -> Message:
        if pending:
            return pending.pop()
        return await receive()

    return replayed
