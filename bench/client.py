"""A low-overhead /assist client: raw asyncio sockets, frames counted by parsing.

One `SseStream` is one request on its own connection:

    stream = SseStream(host, port, "stream:1000", expect_chunks=1000, expect_events=1002)
    await stream.start()      # connect, send the POST, read the status line and headers
    result = await stream.finish()

The request is written by hand (HTTP/1.1, Content-Length, Connection: close).
httptools, the C parser uvicorn itself uses, reads the status line and headers
and takes the body out of `Transfer-Encoding: chunked` (uvicorn's framing for a
stream), or reads it to the close when the response is neither chunked nor
sized. The body is cut at the last blank line that has arrived, and each run of
whole frames is checked in bulk by bytes methods and one regular expression,
all in C, with no Python loop per frame: every frame with a `data:` line has
one event id (`"id":"<26 chars>"`), ids strictly increase across the whole
response, and the text chunks, closing chunks, errors and `done` are counted;
nothing may follow `done`. Comment blocks (`: ping`) carry no data line and
count for nothing. A server may put many frames in one write or one frame in
several: the counts never depend on how the bytes were cut.

Timestamps are `time.perf_counter()` seconds: `t_send` just before the request
is written, `t_first` when the first whole event frame has arrived, `t_end`
when the response has ended.
"""

from __future__ import annotations

import asyncio
import json
import operator
import os
import re
import resource
import time
from dataclasses import dataclass, field

import httptools

_ID = re.compile(rb'"id":"(.{26})"')
_ATOMIC = b'"content_type":"atomic.'
_DONE = b'"content_type":"atomic.done"'
_ERROR = b'"content_type":"atomic.error"'
_CHUNK_OPEN = b'"is_complete":false'
_CHUNK_LAST = b'"is_complete":true'
_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
READ_SIZE = 256 * 1024


def raise_open_files_limit() -> int:
    """Raise RLIMIT_NOFILE's soft limit to the hard limit; children inherit it. Returns the new limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY:
        hard = max(soft, 1 << 20)
    if soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):
            pass
    return soft


def new_ulid() -> str:
    """A random ULID string (48-bit millisecond time, 80 random bits)."""
    n = (time.time_ns() // 1_000_000) << 80 | int.from_bytes(os.urandom(10), "big")
    return "".join(_CROCKFORD[(n >> shift) & 31] for shift in range(125, -1, -5))


def request_body(prompt: str, processor_id: str = "bench") -> bytes:
    """A full request: query and session (the 0.3.0 server needs the session)."""
    return json.dumps(
        {
            "query": {"id": new_ulid(), "prompt": prompt},
            "session": {
                "processor_id": processor_id,
                "activity_id": new_ulid(),
                "request_id": new_ulid(),
                "interactions": [],
            },
        },
        separators=(",", ":"),
    ).encode()


class ProtocolError(Exception):
    """The response is not well-formed HTTP."""


@dataclass(slots=True)
class StreamResult:
    prompt: str
    status: int = 0
    events: int = 0  # frames with a data line: every event, done included
    chunks: int = 0  # text chunks with is_complete false
    closing_chunks: int = 0  # text chunks with is_complete true
    done: int = 0
    errors: int = 0  # error events
    body_bytes: int = 0
    t_connect: float = 0.0
    t_send: float = 0.0
    t_headers: float = 0.0
    t_first: float | None = None
    t_end: float = 0.0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def ttfe(self) -> float | None:
        """Seconds from sending the request to the first complete event frame."""
        return None if self.t_first is None else self.t_first - self.t_send


class SseStream:
    """One POST /assist on its own connection, its SSE body parsed and checked as it arrives.

    httptools (llhttp, in C; uvicorn's own parser) reads the status line and
    headers and takes the body out of its chunked framing, or reads it to the
    close when the response is not chunked.
    """

    def __init__(
        self,
        host: str,
        port: int,
        prompt: str,
        *,
        expect_chunks: int | None = None,
        expect_events: int | None = None,
        processor_id: str = "bench",
    ) -> None:
        self.host, self.port = host, port
        self.result = StreamResult(prompt)
        self._expect_chunks = expect_chunks
        self._expect_events = expect_events
        self._request = request_body(prompt, processor_id)
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._parser = httptools.HttpResponseParser(self)
        self._headers: dict[bytes, bytes] = {}
        self._headers_done = False
        self._complete = False
        self._body: list[bytes] = []  # body bytes parsed and not yet looked at
        self._pending = b""  # body bytes after the last complete frame
        self._last_id = b""
        self._after_done = False

    # httptools callbacks
    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers[name.lower()] = value

    def on_headers_complete(self) -> None:
        self._headers_done = True

    def on_body(self, body: bytes) -> None:
        self._body.append(body)

    def on_message_complete(self) -> None:
        self._complete = True

    def _parse(self, data: bytes) -> None:
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            raise ProtocolError(f"bad HTTP response: {exc}") from None

    async def start(self) -> None:
        """Connect, send the request, read the status line and the headers."""
        r = self.result
        t0 = time.perf_counter()
        self._reader, self._writer = await asyncio.open_connection(self.host, self.port, limit=READ_SIZE)
        r.t_connect = time.perf_counter() - t0
        head = (
            f"POST /assist HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
            "Content-Type: application/json\r\nAccept: text/event-stream\r\n"
            f"Connection: close\r\nContent-Length: {len(self._request)}\r\n\r\n"
        ).encode()
        r.t_send = time.perf_counter()
        self._writer.write(head + self._request)
        while not self._headers_done:
            data = await self._reader.read(READ_SIZE)
            if not data:
                raise ProtocolError("connection closed before the response headers")
            self._parse(data)
        r.t_headers = time.perf_counter()
        r.status = self._parser.get_status_code()
        content_type = self._headers.get(b"content-type", b"")
        if r.status != 200:
            r.problems.append(f"status {r.status}")
        elif not content_type.startswith(b"text/event-stream"):
            r.problems.append(f"content-type {content_type!r}")

    async def finish(self) -> StreamResult:
        """Read the body to its end, then check the counts."""
        r = self.result
        try:
            while True:
                if self._body:
                    body = self._body[0] if len(self._body) == 1 else b"".join(self._body)
                    self._body.clear()
                    self._feed(body)
                if self._complete:
                    break
                data = await self._reader.read(READ_SIZE)
                if not data:
                    # The end of the body, when the response has no length and is not chunked.
                    if b"transfer-encoding" in self._headers or b"content-length" in self._headers:
                        r.problems.append("connection closed before the end of the body")
                    break
                self._parse(data)
            r.t_end = time.perf_counter()
        finally:
            self.close()
        if self._pending.strip():
            r.problems.append(f"{len(self._pending)} bytes after the last complete frame")
        self._check_counts()
        return r

    def close(self) -> None:
        if self._writer is not None:
            self._writer.transport.close()
            self._writer = None

    def _feed(self, body: bytes) -> None:
        self.result.body_bytes += len(body)
        pending = self._pending + body if self._pending else body
        cut = pending.rfind(b"\n\n")
        if cut < 0:
            self._pending = pending
            return
        self._pending = pending[cut + 2 :]
        self._frames(pending[: cut + 2] if self._pending else pending)

    def _frames(self, part: bytes) -> None:
        """Check a run of whole frames: counts, id order, nothing after done.

        Each check is one pass of a bytes method over the run (C speed, no
        Python loop per frame). Comment blocks (`: ping`) have no data line
        and no id, so they count for nothing.
        """
        r = self.result
        ids = _ID.findall(part)
        if not ids:
            if part.count(b"data:"):
                r.problems.append("a data line without an event id")
            return
        if r.t_first is None:
            r.t_first = time.perf_counter()
        if part.count(b"data:") != len(ids):
            r.problems.append("data lines and event ids do not match one for one")
        if self._after_done:
            r.problems.append(f"{len(ids)} events after done")
        if ids[0] <= self._last_id or not all(map(operator.lt, ids, ids[1:])):
            r.problems.append("event ids not strictly increasing")
        self._last_id = ids[-1]
        r.events += len(ids)
        r.chunks += part.count(_CHUNK_OPEN)
        r.closing_chunks += part.count(_CHUNK_LAST)
        if part.find(_ATOMIC) >= 0:  # text blocks, documents, errors, done: rare, so looked at only here
            r.errors += part.count(_ERROR)
            done_at = part.find(_DONE)
            if done_at >= 0:
                r.done += part.count(_DONE)
                self._after_done = True
                if part.find(b"data:", done_at) >= 0:
                    r.problems.append("an event follows done")

    def _check_counts(self) -> None:
        r = self.result
        if r.status != 200:
            return
        if r.done != 1:
            r.problems.append(f"{r.done} done events")
        if r.errors:
            r.problems.append(f"{r.errors} error events")
        if self._expect_chunks is not None:
            if r.chunks != self._expect_chunks:
                r.problems.append(f"{r.chunks} chunks, expected {self._expect_chunks}")
            if r.closing_chunks != 1:
                r.problems.append(f"{r.closing_chunks} closing chunks, expected 1")
        if self._expect_events is not None and r.events != self._expect_events:
            r.problems.append(f"{r.events} events, expected {self._expect_events}")


def expectations(prompt: str) -> dict[str, int | None]:
    """What a correct response to a bench agent prompt holds (see bench/agent.py)."""
    kind, _, arg = prompt.partition(":")
    if kind == "stream":
        n = int(arg)
        return {"expect_chunks": n, "expect_events": n + 2}  # the chunks, the closing chunk, done
    if kind == "wait":
        return {"expect_chunks": None, "expect_events": 2}  # one text block, done
    raise ValueError(f"unknown bench prompt {prompt!r}")


async def assist(host: str, port: int, prompt: str, *, timeout: float) -> StreamResult:
    """One whole request. A failure (refused, reset, timeout, bad HTTP) is a result with problems, not an exception."""
    stream = SseStream(host, port, prompt, **expectations(prompt))
    try:
        async with asyncio.timeout(timeout):
            await stream.start()
            return await stream.finish()
    except TimeoutError:
        stream.result.problems.append(f"timed out after {timeout}s")
    except (OSError, ProtocolError) as exc:
        stream.result.problems.append(f"{type(exc).__name__}: {exc}")
    finally:
        stream.close()
    stream.result.t_end = time.perf_counter()
    return stream.result


def loop_factory():
    """uvloop's event loop when it is installed (for `asyncio.Runner(loop_factory=...)`), else None."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop
