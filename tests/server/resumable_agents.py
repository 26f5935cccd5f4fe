"""A deterministic agent for the tests of resumable runs: the prompt `count:N:MS` streams the
tokens `t0 `, `t1 `, ... `t{N-1} ` one every MS milliseconds, under a PLAN block, then completes.
`big:N:BYTES[:MS]` sends N text blocks of BYTES characters, one every MS milliseconds (for the
buffer's bounds)."""

from __future__ import annotations

import asyncio

from sentient_assist import AbstractAgent, Query, ResponseHandler, Session


class CountingAgent(AbstractAgent):
    name = "counting"
    description = "Test agent: streams numbered tokens at a pace the prompt sets."

    async def assist(self, session: Session, query: Query, response_handler: ResponseHandler) -> None:
        kind, _, rest = query.prompt.partition(":")
        first, _, second = rest.partition(":")
        if kind == "big":
            size, _, pace = second.partition(":")
            for index in range(int(first)):
                if pace:
                    await asyncio.sleep(float(pace) / 1000)
                await response_handler.emit_text_block("BLOCK", str(index % 10) * int(size))
            await response_handler.complete()
            return
        count, pause = int(first or 0), float(second or 0) / 1000
        await response_handler.emit_text_block("PLAN", f"{count} tokens")
        stream = response_handler.create_text_stream("FINAL_RESPONSE")
        for index in range(count):
            if pause:
                await asyncio.sleep(pause)
            await stream.emit_chunk(f"t{index} ")
        await stream.complete()
        await response_handler.complete()
