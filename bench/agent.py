"""The benchmark agent: one class, written against the 0.3.0 author API.

It runs unchanged in this service and in the 0.3.0 package's DefaultServer.
`BENCH_FRAMEWORK` picks the API it imports: `sentient_assist` (the default, this service)
or `sentient_agent_framework` (bench/reference_server.py sets it).

The prompt picks the load:

    stream:N   N text chunks of CHUNK, as fast as the server takes them, then
               the stream's closing chunk and done: N + 2 events
    wait:S     sleep S seconds, then one text block and done: 2 events
    hold:S     one text block at once, then the same as wait:S: a stream held open once its
               request has been taken (bench/face_inputs.py)
"""

from __future__ import annotations

import asyncio
import os

if os.environ.get("BENCH_FRAMEWORK", "sentient_assist") == "sentient_agent_framework":
    from sentient_agent_framework import AbstractAgent
else:
    from sentient_assist import AbstractAgent

# Every chunk carries the same 16 characters.
CHUNK = "0123456789abcdef"
EVENT_NAME = "FINAL_RESPONSE"


def wait_answer(seconds: str) -> str:
    return f"waited {seconds} s"


class BenchAgent(AbstractAgent):
    name = "bench"
    description = "Benchmark loads: 'stream:N' streams N chunks, 'wait:S' answers after S seconds."

    def __init__(self, name: str = "bench") -> None:
        super().__init__(name)

    async def assist(self, session, query, response_handler) -> None:
        kind, _, arg = query.prompt.partition(":")
        if kind == "stream":
            stream = response_handler.create_text_stream(EVENT_NAME)
            for _ in range(int(arg)):
                await stream.emit_chunk(CHUNK)
            await stream.complete()
        elif kind in ("wait", "hold"):
            if kind == "hold":
                await response_handler.emit_text_block(EVENT_NAME, "holding")
            await asyncio.sleep(float(arg))
            await response_handler.emit_text_block(EVENT_NAME, wait_answer(arg))
        else:
            await response_handler.emit_error(f"unknown load {query.prompt!r}: use stream:N or wait:S", 400)
        await response_handler.complete()
