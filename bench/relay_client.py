"""The relay load's client: one POST per stream, each relayed token's latency from upstream send to receipt.

    stream = RelayStream(host, port, "relay:100:20", expect_tokens=100)
    await stream.run(gate)        # connect (under the gate), send, read to the end
    stream.latencies              # seconds, one per token: receipt time - the upstream's send time

An asyncio Protocol (no StreamReader: one callback per read, the cheapest a Python client gets),
httptools for the status line, headers and chunked framing, as bench/client.py. The request is
bench/client.py's /assist body, or an OpenAI chat request when `direct` (the client reading the
fake upstream itself: the floor of what this measurement can see).

Each token's text is `@<send time>|` (bench/relay_upstream.py: `time.time()` just before the
upstream's write). Each read is stamped with `time.time()` as it arrives; the frames it completes
are searched in one regex pass for the send times, and each token's latency is that stamp minus
its send time. Both clocks are the same machine's wall clock. The stream is checked: status 200,
exactly the expected tokens, in order (send times never decrease), one `done` (or `[DONE]` when
direct) and no error event.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import time

import httptools

from bench.client import _DONE, _ERROR, request_body

_SENT = re.compile(rb"@(\d+\.\d+)\|")
_DIRECT_DONE = b"data: [DONE]"


class RelayStream(asyncio.Protocol):
    def __init__(self, host: str, port: int, prompt: str, *, expect_tokens: int, direct: bool = False) -> None:
        self.host, self.port = host, port
        self.prompt = prompt
        self.expect_tokens = expect_tokens
        self.direct = direct
        if direct:
            body = json.dumps(
                {
                    "model": "relay",
                    "messages": [{"role": "user", "content": prompt}],
                    "stream": True,
                    "stream_options": {"include_usage": True},
                }
            ).encode()
            path = "/v1/chat/completions"
        else:
            body = request_body(prompt)
            path = "/assist"
        self._request = (
            f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
            f"Accept: text/event-stream\r\nConnection: close\r\nContent-Length: {len(body)}\r\n\r\n"
        ).encode() + body
        self._parser = httptools.HttpResponseParser(self)
        self._pending = b""
        self._now = 0.0
        self._last_sent = 0.0
        self._headers = asyncio.get_running_loop().create_future()
        self._closed = asyncio.get_running_loop().create_future()
        self.transport: asyncio.Transport | None = None
        self.status = 0
        self.tokens = 0
        self.done = 0
        self.errors = 0
        self.after_done = False
        self.complete = False
        self.latencies: list[float] = []
        self.reads: list[tuple[float, int]] = []  # (receipt time, tokens in it), for the steady-state window
        self.t_first: float | None = None  # time.time() of the first token's receipt
        self.t_last: float | None = None
        self.problems: list[str] = []

    # asyncio.Protocol
    def connection_made(self, transport) -> None:
        self.transport = transport
        transport.write(self._request)

    def data_received(self, data: bytes) -> None:
        self._now = time.time()
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self.problems.append(f"bad HTTP response: {exc}")
            self.transport.close()

    def connection_lost(self, exc) -> None:
        if not self._headers.done():
            self._headers.set_result(None)
        if not self._closed.done():
            self._closed.set_result(None)

    # httptools callbacks
    def on_headers_complete(self) -> None:
        self.status = self._parser.get_status_code()
        if self.status != 200:
            self.problems.append(f"status {self.status}")
        if not self._headers.done():
            self._headers.set_result(None)

    def on_body(self, body: bytes) -> None:
        pending = self._pending + body if self._pending else body
        cut = pending.rfind(b"\n\n")
        if cut < 0:
            self._pending = pending
            return
        self._pending = pending[cut + 2 :]
        self._frames(pending[: cut + 2])

    def on_message_complete(self) -> None:
        self.complete = True
        self.transport.close()

    def _frames(self, part: bytes) -> None:
        sent = _SENT.findall(part)
        if sent:
            now = self._now
            if self.after_done:
                self.problems.append("tokens after done")
            times = [float(s) for s in sent]
            if times[0] < self._last_sent or any(b < a for a, b in itertools.pairwise(times)):
                self.problems.append("tokens out of order")
            self._last_sent = times[-1]
            self.latencies.extend([now - t for t in times])
            self.tokens += len(times)
            self.reads.append((now, len(times)))
            if self.t_first is None:
                self.t_first = now
            self.t_last = now
        if self.direct:
            if part.find(_DIRECT_DONE) >= 0:
                self.done += part.count(_DIRECT_DONE)
                self.after_done = True
        elif part.find(b'"content_type":"atomic.') >= 0:
            self.errors += part.count(_ERROR)
            if part.find(_DONE) >= 0:
                self.done += part.count(_DONE)
                self.after_done = True

    async def run(self, gate: asyncio.Semaphore | None, timeout: float) -> RelayStream:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout):
                if gate is not None:
                    async with gate:
                        await loop.create_connection(lambda: self, self.host, self.port)
                        await self._headers
                else:
                    await loop.create_connection(lambda: self, self.host, self.port)
                await self._closed
        except TimeoutError:
            self.problems.append(f"timed out after {timeout}s")
        except OSError as exc:
            self.problems.append(f"{type(exc).__name__}: {exc}")
        finally:
            if self.transport is not None:
                self.transport.close()
        self._check()
        return self

    def _check(self) -> None:
        if self.status == 0 and not self.problems:
            self.problems.append("no response")
        if self.status != 200:
            return
        if not self.complete:
            self.problems.append("the response ended early")
        if self.tokens != self.expect_tokens:
            self.problems.append(f"{self.tokens} tokens, expected {self.expect_tokens}")
        if self.done != 1:
            self.problems.append(f"{self.done} done events")
        if self.errors:
            self.problems.append(f"{self.errors} error events")

    @property
    def ok(self) -> bool:
        return not self.problems
