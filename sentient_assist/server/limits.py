"""Limits on /assist: concurrent streams (503), and the size (413) and time (408) of a request body."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from fastapi import HTTPException
from starlette.datastructures import Headers
from starlette.types import Message, Receive

from sentient_assist.server.draining import is_draining

RETRY_AFTER_SECONDS = "1"
SHUTTING_DOWN = "the server is shutting down; retry on another instance"
DRAIN_CHECK_SECONDS = 0.5
# What nginx logs for a client that left before its answer: there is nobody to send it to.
CLIENT_CLOSED_REQUEST = 499
# On a 408 or 413: the rest of a refused body is not read, so the server closes the connection after the answer.
CLOSE_AFTER_ANSWER = {"Connection": "close"}


class StreamGate:
    """Counts the places held under ASSIST_MAX_STREAMS (streams, and runs with no connection);
    past it, or while draining, refuses with 503. With `max_per_owner`, no one key (an owner,
    `auth.key_owner`) holds more than that many, so no key can make another's request a 503."""

    __slots__ = ("max_streams", "max_per_owner", "open", "_held", "_on_change")

    def __init__(
        self, max_streams: int, on_change: Callable[[int], None] | None = None, max_per_owner: int | None = None
    ) -> None:
        self.max_streams = max_streams
        self.max_per_owner = max_per_owner
        self.open = 0
        self._held: dict[str, int] = {}  # by owner, while it holds any
        self._on_change = on_change or (lambda delta: None)

    def enter(self, owner: str = "") -> None:
        """Take a place for `owner`, or raise the 503 that says why there is none."""
        if is_draining():
            raise HTTPException(503, SHUTTING_DOWN, {"Retry-After": RETRY_AFTER_SECONDS})
        self._take(owner)
        self._on_change(1)

    def leave(self, owner: str = "") -> None:
        self._give_back(owner)
        self._on_change(-1)

    def take(self, owner: str = "") -> bool:
        """A place for a run that goes on with no connection (a detached run); False when there is none."""
        try:
            self._take(owner)
        except HTTPException:
            return False
        return True

    def give_back(self, owner: str = "") -> None:
        self._give_back(owner)

    def _take(self, owner: str) -> None:
        if self.open >= self.max_streams:
            raise HTTPException(
                503,
                f"the server is at its limit of {self.max_streams} concurrent streams; retry shortly",
                {"Retry-After": RETRY_AFTER_SECONDS},
            )
        if owner and self.max_per_owner is not None:
            held = self._held.get(owner, 0)
            if held >= self.max_per_owner:
                raise HTTPException(
                    503,
                    f"this key holds its share of {self.max_per_owner} concurrent streams "
                    f"(ASSIST_MAX_STREAMS_PER_KEY); retry shortly",
                    {"Retry-After": RETRY_AFTER_SECONDS},
                )
            self._held[owner] = held + 1
        self.open += 1

    def _give_back(self, owner: str) -> None:
        self.open -= 1
        if owner and owner in self._held:
            left = self._held[owner] - 1
            if left:
                self._held[owner] = left
            else:
                del self._held[owner]


class LimitedBody:
    """A `receive` that bounds a request body: in size (413 past `max_bytes`) and in time (408
    when it has not arrived in full `timeout` seconds after the headers).

    Content-Length is checked before a byte is read (`check_declared`); a chunked body is
    counted as it arrives. While the body is awaited, a server shutting down answers 503, as
    for new streams. A client that leaves before its body is whole gets a 499, which nobody
    hears but the access log. Once the body is in, messages pass through untouched: the
    stream listens on this same `receive` for the client to leave.
    """

    __slots__ = ("_receive", "_max_bytes", "_timeout", "_deadline", "_size", "_body_done")

    def __init__(self, receive: Receive, max_bytes: int, timeout: float) -> None:
        self._receive = receive
        self._max_bytes = max_bytes
        self._timeout = timeout
        self._deadline = asyncio.get_running_loop().time() + timeout
        self._size = 0
        self._body_done = False

    def check_declared(self, headers: Headers) -> None:
        value = headers.get("content-length")
        try:
            declared = None if value is None else int(value)
        except ValueError:
            declared = None
        if declared is not None and declared > self._max_bytes:
            raise self._too_large()

    async def __call__(self) -> Message:
        if self._body_done:
            return await self._receive()
        message = await self._next_body_message()
        if message["type"] == "http.disconnect":
            raise HTTPException(CLIENT_CLOSED_REQUEST, "the client closed the request before its body arrived")
        self._size += len(message.get("body", b""))
        if self._size > self._max_bytes:
            raise self._too_large()
        self._body_done = not message.get("more_body", False)
        return message

    async def _next_body_message(self) -> Message:
        loop = asyncio.get_running_loop()
        while True:
            left = self._deadline - loop.time()
            if left <= 0:
                raise HTTPException(
                    408, f"the request body did not arrive within {self._timeout:g} seconds", dict(CLOSE_AFTER_ANSWER)
                )
            if is_draining():
                raise HTTPException(503, SHUTTING_DOWN, {"Retry-After": RETRY_AFTER_SECONDS})
            try:
                # In slices, so that a shutdown is noticed while the body is still on its way.
                async with asyncio.timeout(min(left, DRAIN_CHECK_SECONDS)):
                    return await self._receive()
            except TimeoutError:
                continue

    def _too_large(self) -> HTTPException:
        return HTTPException(
            413, f"the request body is larger than the limit of {self._max_bytes} bytes", dict(CLOSE_AFTER_ANSWER)
        )
