"""Resource limits on /assist: concurrent streams (503 + Retry-After) and the request body's size (413)."""

from __future__ import annotations

from collections.abc import Callable

from fastapi import HTTPException
from starlette.datastructures import Headers
from starlette.types import Message, Receive, Scope

from app.server.draining import is_draining

RETRY_AFTER_SECONDS = "1"
# What nginx logs for a client that left before its answer: there is nobody to send it to.
CLIENT_CLOSED_REQUEST = 499


class StreamGate:
    """Counts open /assist streams; past ASSIST_MAX_STREAMS, or while draining, refuses with 503."""

    __slots__ = ("max_streams", "open", "_on_change")

    def __init__(self, max_streams: int, on_change: Callable[[int], None] | None = None) -> None:
        self.max_streams = max_streams
        self.open = 0
        self._on_change = on_change or (lambda delta: None)

    def enter(self) -> None:
        """Take a place, or raise the 503 that says why there is none."""
        if is_draining():
            raise HTTPException(
                503, "the server is shutting down; retry on another instance", {"Retry-After": RETRY_AFTER_SECONDS}
            )
        if self.open >= self.max_streams:
            raise HTTPException(
                503,
                f"the server is at its limit of {self.max_streams} concurrent streams; retry shortly",
                {"Retry-After": RETRY_AFTER_SECONDS},
            )
        self.open += 1
        self._on_change(1)

    def leave(self) -> None:
        self.open -= 1
        self._on_change(-1)


class LimitedBody:
    """A `receive` that refuses a request body past `max_bytes` with 413.

    Content-Length is checked before a byte is read (`check_declared`); a chunked body is
    counted as it arrives. A client that leaves before its body is whole gets a 499, which
    nobody hears but the access log. Once the body is in, messages pass through untouched:
    the stream listens on this same `receive` for the client to leave.
    """

    __slots__ = ("_receive", "_max_bytes", "_size", "_body_done")

    def __init__(self, receive: Receive, max_bytes: int) -> None:
        self._receive = receive
        self._max_bytes = max_bytes
        self._size = 0
        self._body_done = False

    def check_declared(self, scope: Scope) -> None:
        value = Headers(scope=scope).get("content-length")
        try:
            declared = None if value is None else int(value)
        except ValueError:
            declared = None
        if declared is not None and declared > self._max_bytes:
            raise self._too_large()

    async def __call__(self) -> Message:
        message = await self._receive()
        if self._body_done:
            return message
        if message["type"] == "http.disconnect":
            raise HTTPException(CLIENT_CLOSED_REQUEST, "the client closed the request before its body arrived")
        self._size += len(message.get("body", b""))
        if self._size > self._max_bytes:
            raise self._too_large()
        self._body_done = not message.get("more_body", False)
        return message

    def _too_large(self) -> HTTPException:
        return HTTPException(413, f"the request body is larger than the limit of {self._max_bytes} bytes")
