"""The tests' one SSE reader.

- `events_of(body)` and `iter_events(response)` read any face's stream as the SSE spec does
  (`event:`, `data:` lines joined, `id:`, comments skipped): /v1, /agui, /mcp, /a2a, the runs.
- `read_stream`/`read_response` read an /assist response strictly: every byte must be a
  well-formed frame (one `event:` line, one `data:` line whose event_name is the same, a blank
  line) or a comment, as PROTOCOL.md has it.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
from ulid import ULID


def new_body(prompt: str, session: dict | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"query": {"id": str(ULID()), "prompt": prompt}}
    if session is not None:
        body["session"] = session
    return body


def new_session(processor_id: str = "test-processor", interactions: list | None = None) -> dict[str, Any]:
    return {
        "processor_id": processor_id,
        "activity_id": str(ULID()),
        "request_id": str(ULID()),
        "interactions": interactions or [],
    }


@dataclass
class Event:
    """One SSE event: its type (None when the block named none), its data lines joined by
    newlines, its id (None when it had none)."""

    event: str | None
    data: str
    id: str | None = None

    @property
    def json(self) -> Any:
        return json.loads(self.data)


def _event_of(block: str) -> Event | None:
    event: str | None = None
    data: list[str] = []
    id_: str | None = None
    for line in block.split("\n"):
        if not line or line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "event":
            event = value
        elif name == "data":
            data.append(value)
        elif name == "id":
            id_ = value
    if not data and event is None:
        return None  # comments only
    return Event(event, "\n".join(data), id_)


def events_of(body: str | bytes) -> list[Event]:
    """The events of a whole SSE body."""
    text = body.decode() if isinstance(body, bytes) else body
    blocks = text.replace("\r\n", "\n").split("\n\n")
    return [event for event in map(_event_of, blocks) if event is not None]


def _split(chunks: Iterable[bytes]) -> Iterator[Event]:
    buffer = b""
    for chunk in chunks:
        buffer += chunk.replace(b"\r\n", b"\n")
        while b"\n\n" in buffer:
            block, buffer = buffer.split(b"\n\n", 1)
            event = _event_of(block.decode())
            if event is not None:
                yield event


def iter_events(response: httpx.Response) -> Iterator[Event]:
    """The events of a streamed response, each as soon as it has arrived. Keep the iterator while
    the stream must stay open: dropped, it closes the response (as httpx's own iterators do)."""
    yield from _split(response.iter_raw())


async def aiter_events(response: httpx.Response) -> AsyncIterator[Event]:
    """The events of a streamed response read by an AsyncClient, each as soon as it has arrived."""
    buffer = b""
    async for chunk in response.aiter_raw():
        buffer += chunk.replace(b"\r\n", b"\n")
        while b"\n\n" in buffer:
            block, buffer = buffer.split(b"\n\n", 1)
            event = _event_of(block.decode())
            if event is not None:
                yield event


@dataclass
class Frame:
    event_name: str
    data: str
    received_at: float

    @property
    def json(self) -> dict[str, Any]:
        return json.loads(self.data)


@dataclass
class Stream:
    status: int
    headers: httpx.Headers
    frames: list[Frame] = field(default_factory=list)
    comments: list[str] = field(default_factory=list)
    raw: bytes = b""

    @property
    def events(self) -> list[dict[str, Any]]:
        return [frame.json for frame in self.frames]

    def names(self) -> list[str]:
        return [frame.event_name for frame in self.frames]


def parse_block(block: bytes, received_at: float, stream: Stream) -> None:
    """One block between blank lines: comments only, or exactly `event:` then `data:`."""
    lines = block.decode("utf-8").split("\n")
    if all(line.startswith(":") for line in lines):
        stream.comments.extend(lines)
        return
    assert len(lines) == 2, f"a frame must be an event line and a data line: {block!r}"
    event_line, data_line = lines
    assert event_line.startswith("event: "), block
    assert data_line.startswith("data: "), block
    event_name = event_line[len("event: ") :]
    data = data_line[len("data: ") :]
    assert json.loads(data)["event_name"] == event_name, block
    stream.frames.append(Frame(event_name, data, received_at))


def read_stream(
    url: str,
    body: Any,
    *,
    timeout: float = 30.0,
    headers: dict | None = None,
    on_frame: Callable[[Frame], None] | None = None,
) -> Stream:
    """POST body and read the whole response, parsing each frame as it arrives (`on_frame` sees each)."""
    with httpx.Client(timeout=timeout) as client:
        kwargs = {"json": body} if not isinstance(body, (bytes, str)) else {"content": body}
        with client.stream("POST", url + "/assist", headers=headers, **kwargs) as response:
            return read_response(response, on_frame)


def read_response(
    response: httpx.Response,
    on_frame: Callable[[Frame], None] | None = None,
    *,
    max_bytes: int | None = None,
    deadline: float | None = None,
) -> Stream:
    """Read a streamed /assist response to its end, parsing each frame as it arrives. With
    `max_bytes` or `deadline` (a time.monotonic()), an answer that does not end fails the test
    there rather than hanging it."""
    stream = Stream(response.status_code, response.headers)
    buffer = b""
    for chunk in response.iter_raw():
        now = time.time()
        stream.raw += chunk
        assert max_bytes is None or len(stream.raw) <= max_bytes, "the answer does not end"
        assert deadline is None or time.monotonic() < deadline, "the answer is still coming at its deadline"
        buffer += chunk
        while b"\n\n" in buffer:
            block, buffer = buffer.split(b"\n\n", 1)
            if response.status_code == 200:
                frames_before = len(stream.frames)
                parse_block(block, now, stream)
                if on_frame is not None and len(stream.frames) > frames_before:
                    on_frame(stream.frames[-1])
    if response.status_code == 200:
        assert buffer == b"", f"bytes after the last frame: {buffer!r}"
    return stream


async def aread_response(response: httpx.Response, stop_after: int | None = None) -> Stream:
    """`read_response` for an AsyncClient's streamed response; with `stop_after`, it stops reading
    once that many frames have come (the caller's leaving the response then closes it mid-stream)."""
    stream = Stream(response.status_code, response.headers)
    if response.status_code != 200:
        stream.raw = await response.aread()
        return stream
    buffer = b""
    async for chunk in response.aiter_raw():
        now = time.time()
        stream.raw += chunk
        buffer += chunk
        while b"\n\n" in buffer:
            block, buffer = buffer.split(b"\n\n", 1)
            parse_block(block, now, stream)
            if stop_after is not None and len(stream.frames) >= stop_after:
                return stream
    assert buffer == b"", f"bytes after the last frame: {buffer!r}"
    return stream
