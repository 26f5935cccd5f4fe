"""The floor: a bare ASGI callable that sends pre-serialized frames, run by the same uvicorn.

No framework, no agent, no per-event work: it reads the request body for the
prompt, then sends frames built beforehand, one `send` per frame, each the
same size as the frame this service sends for that event (built with the
service's own event classes, with strictly increasing ids), and `done` last.
The frames of a `stream:N` load are built once, on the first request for that
N, and reused (a warm-up request pays for it).

    python -m bench.bare_server --port 8002
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets

from bench.agent import CHUNK, EVENT_NAME, wait_answer
from sentient_assist.protocol.events import DoneEvent, TextBlockEvent, TextChunkEvent
from sentient_assist.runtime.ids import MonotonicUlid

SOURCE = "bench"  # the session's processor_id that bench/client.py sends
HEADERS = [(b"content-type", b"text/event-stream; charset=utf-8"), (b"cache-control", b"no-store")]

_streams: dict[int, tuple[list[bytes], bytes]] = {}


def stream_frames(n: int) -> tuple[list[bytes], bytes]:
    """N chunk frames and the closing chunk's frame; then the done frame."""
    if n not in _streams:
        next_id = MonotonicUlid()
        stream_id = secrets.token_hex(5)
        frames = []
        for i in range(n + 1):
            last = i == n
            event = TextChunkEvent(
                event_name=EVENT_NAME,
                source=SOURCE,
                stream_id=stream_id,
                is_complete=last,
                content="" if last else CHUNK,
            )
            event.id = next_id()
            frames.append(event.sse_frame())
        done = DoneEvent(source=SOURCE)
        done.id = next_id()
        _streams[n] = (frames, done.sse_frame())
    return _streams[n]


def wait_frames(seconds: str) -> tuple[bytes, bytes]:
    next_id = MonotonicUlid()
    block = TextBlockEvent(event_name=EVENT_NAME, source=SOURCE, content=wait_answer(seconds))
    block.id = next_id()
    done = DoneEvent(source=SOURCE)
    done.id = next_id()
    return block.sse_frame(), done.sse_frame()


async def app(scope, receive, send) -> None:
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    if scope["type"] != "http":
        return
    if scope["method"] != "POST" or scope["path"] != "/assist":
        await send({"type": "http.response.start", "status": 404, "headers": [(b"content-length", b"0")]})
        await send({"type": "http.response.body", "body": b""})
        return
    body = b""
    more = True
    while more:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
        body += message.get("body", b"")
        more = message.get("more_body", False)
    kind, _, arg = json.loads(body)["query"]["prompt"].partition(":")
    await send({"type": "http.response.start", "status": 200, "headers": HEADERS})
    if kind == "stream":
        frames, done = stream_frames(int(arg))
        for frame in frames:
            await send({"type": "http.response.body", "body": frame, "more_body": True})
    else:
        await asyncio.sleep(float(arg))
        block, done = wait_frames(arg)
        await send({"type": "http.response.body", "body": block, "more_body": True})
    await send({"type": "http.response.body", "body": done, "more_body": False})


def main() -> None:
    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
