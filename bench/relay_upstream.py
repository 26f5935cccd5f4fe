"""A fake OpenAI-compatible upstream for the relay load: POST /v1/chat/completions, streamed at a steady pace.

    python -m bench.relay_upstream --port 9000 [--tokens 100] [--interval 0.02]

Its own process, on uvloop, a plain asyncio protocol with httptools (no framework: it must
not be the bottleneck, and a timer callback per token plus one `transport.write` is about as
cheap as a paced stream gets). HTTP/1.1 with keep-alive (the openai client pools its
connections), the response chunked, as OpenAI's is:

    data: {"object":"chat.completion.chunk", ... "delta":{"role":"assistant","content":""} ...}
    data: {... "delta":{"content":"@1732990000.123456| "} ...}      N times, one every interval
    data: {... "delta":{},"finish_reason":"stop" ...}
    data: {... "choices":[],"usage":{...}}                            when stream_options.include_usage
    data: [DONE]

Each token's text carries its send time, `time.time()` taken just before the write, as
`@<seconds>|`: the client (bench/relay_client.py) finds it in the event the server relays and
takes receipt time minus send time. The pace is per stream: token i at start + i * interval,
on the event loop's clock, so a late tick does not shift the ticks after it.

The last user message may override the defaults: `relay:N` or `relay:N:MS` (N tokens, one every
MS milliseconds).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import time

import httptools

_PROMPT = re.compile(rb"relay:(\d+)(?::(\d+(?:\.\d+)?))?")


class Upstream:
    tokens = 100
    interval = 0.02


def _chunk(body: bytes) -> bytes:
    return b"%x\r\n%b\r\n" % (len(body), body)


class StreamingProtocol(asyncio.Protocol):
    __slots__ = ("loop", "transport", "parser", "url", "body", "busy", "closed", "queue")

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpRequestParser(self)
        self.url = b""
        self.body: list[bytes] = []
        self.busy = False
        self.closed = False
        self.queue: list[tuple[bytes, bytes]] = []  # pipelined requests (not expected)

    def connection_made(self, transport) -> None:
        self.transport = transport

    def connection_lost(self, exc) -> None:
        self.closed = True

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            self.transport.close()

    # httptools callbacks
    def on_message_begin(self) -> None:
        self.url = b""
        self.body = []

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        request = (self.url, b"".join(self.body))
        if self.busy:
            self.queue.append(request)
        else:
            self.handle(*request)

    def handle(self, url: bytes, body: bytes) -> None:
        if not url.startswith(b"/v1/chat/completions"):
            self.respond(404, b'{"error":{"message":"not found"}}')
            return
        try:
            request = json.loads(body)
        except ValueError:
            self.respond(400, b'{"error":{"message":"bad json"}}')
            return
        tokens, interval = Upstream.tokens, Upstream.interval
        last_user = next((m for m in reversed(request.get("messages", [])) if m.get("role") == "user"), None)
        content = last_user.get("content") if last_user else None
        if isinstance(content, str):
            m = _PROMPT.search(content.encode())
            if m:
                tokens = int(m.group(1))
                if m.group(2) is not None:
                    interval = float(m.group(2)) / 1000
        usage = bool((request.get("stream_options") or {}).get("include_usage"))
        model = str(request.get("model", "relay"))
        if not request.get("stream"):
            self.respond(400, b'{"error":{"message":"only stream=true is served"}}')
            return
        self.busy = True
        PacedStream(self, model, tokens, interval, usage).begin()

    def respond(self, status: int, body: bytes) -> None:
        reason = {400: b"Bad Request", 404: b"Not Found"}.get(status, b"OK")
        self.transport.write(
            b"HTTP/1.1 %d %b\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%b"
            % (status, reason, len(body), body)
        )

    def finished(self) -> None:
        self.busy = False
        if self.queue and not self.closed:
            self.handle(*self.queue.pop(0))


class PacedStream:
    """One streamed answer: a timer callback per token, each one write."""

    __slots__ = ("proto", "head", "tail", "tokens", "interval", "usage", "sent", "start")

    def __init__(self, proto: StreamingProtocol, model: str, tokens: int, interval: float, usage: bool) -> None:
        self.proto = proto
        created = int(time.time())
        ident = f"chatcmpl-{id(self):x}{created}"
        prefix = json.dumps(
            {"id": ident, "object": "chat.completion.chunk", "created": created, "model": model},
            separators=(",", ":"),
        )[:-1]
        # Everything of a token's frame but its text, split around it.
        self.head = f'data: {prefix},"choices":[{{"index":0,"delta":{{"content":"'.encode()
        self.tail = b'"},"finish_reason":null}]}\n\n'
        self.tokens = tokens
        self.interval = interval
        self.usage = (prefix, usage)
        self.sent = 0
        self.start = 0.0

    def begin(self) -> None:
        proto = self.proto
        prefix, _ = self.usage
        first = (
            f'data: {prefix},"choices":[{{"index":0,"delta":{{"role":"assistant","content":""}},'
            '"finish_reason":null}]}\n\n'
        )
        proto.transport.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\n"
            b"cache-control: no-cache\r\ntransfer-encoding: chunked\r\n\r\n" + _chunk(first.encode())
        )
        self.start = proto.loop.time()
        proto.loop.call_at(self.start + self.interval, self.tick)

    def tick(self) -> None:
        proto = self.proto
        if proto.closed:
            return
        self.sent += 1
        text = b"@%.6f| " % time.time()
        proto.transport.write(_chunk(self.head + text + self.tail))
        if self.sent < self.tokens:
            proto.loop.call_at(self.start + (self.sent + 1) * self.interval, self.tick)
        else:
            self.end()

    def end(self) -> None:
        prefix, usage = self.usage
        parts = [f'data: {prefix},"choices":[{{"index":0,"delta":{{}},"finish_reason":"stop"}}]}}\n\n']
        if usage:
            n = self.tokens
            parts.append(
                f'data: {prefix},"choices":[],"usage":{{"prompt_tokens":20,"completion_tokens":{n},'
                f'"total_tokens":{n + 20}}}}}\n\n'
            )
        parts.append("data: [DONE]\n\n")
        self.proto.transport.write(_chunk("".join(parts).encode()) + b"0\r\n\r\n")
        self.proto.finished()


async def serve(host: str, port: int) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(StreamingProtocol, host, port, backlog=4096, reuse_address=True)
    async with server:
        await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--tokens", type=int, default=Upstream.tokens)
    parser.add_argument("--interval", type=float, default=Upstream.interval, help="seconds between tokens")
    args = parser.parse_args()
    Upstream.tokens, Upstream.interval = args.tokens, args.interval
    try:
        import uvloop

        runner = asyncio.Runner(loop_factory=uvloop.new_event_loop)
    except ImportError:
        runner = asyncio.Runner()
    with runner:
        try:
            runner.run(serve(args.host, args.port))
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
