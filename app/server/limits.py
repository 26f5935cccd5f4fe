"""Resource limits on /assist: concurrent streams (503 + Retry-After) and the request body's size (413)."""

from __future__ import annotations

from typing import Callable

from starlette.datastructures import Headers
from starlette.types import Receive, Scope

from app.server.draining import is_draining
from app.server.responses import Refusal

RETRY_AFTER_SECONDS = "1"


class StreamGate:
    """Counts open /assist streams; past ASSIST_MAX_STREAMS, or while draining, refuses with 503."""

    __slots__ = ("max_streams", "open", "_on_change")

    def __init__(self, max_streams: int, on_change: Callable[[int], None] | None = None) -> None:
        self.max_streams = max_streams
        self.open = 0
        self._on_change = on_change or (lambda delta: None)

    def refusal(self) -> Refusal | None:
        if is_draining():
            return Refusal(503, "the server is shutting down; retry on another instance", {"Retry-After": RETRY_AFTER_SECONDS})
        if self.open >= self.max_streams:
            return Refusal(
                503, f"the server is at its limit of {self.max_streams} concurrent streams; retry shortly",
                {"Retry-After": RETRY_AFTER_SECONDS},
            )
        return None

    def enter(self) -> None:
        self.open += 1
        self._on_change(1)

    def leave(self) -> None:
        self.open -= 1
        self._on_change(-1)


class ClientGone(Exception):
    """The client disconnected before its request body arrived in full."""


async def read_body(scope: Scope, receive: Receive, max_bytes: int) -> bytes | Refusal:
    """The whole request body, or a 413 refusal past `max_bytes`.

    Content-Length is checked first, so a large body is refused before a byte of it is read;
    a chunked body is counted as it arrives.
    """
    declared = _content_length(scope)
    if declared is not None and declared > max_bytes:
        return _too_large(max_bytes)
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientGone
        body = message.get("body", b"")
        size += len(body)
        if size > max_bytes:
            return _too_large(max_bytes)
        chunks.append(body)
        if not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def _too_large(max_bytes: int) -> Refusal:
    return Refusal(413, f"the request body is larger than the limit of {max_bytes} bytes")


def _content_length(scope: Scope) -> int | None:
    value = Headers(scope=scope).get("content-length")
    try:
        return None if value is None else int(value)
    except ValueError:
        return None
