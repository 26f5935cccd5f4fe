"""The ScriptedAgent plus `paced`, for test_load_and_faults.py: paced streams that all run at once.

    paced:COUNT:PAUSE_MS:GATE:SIZE

sends chunk "0 " of a FINAL_RESPONSE text stream, waits until SIZE streams of the gate
named GATE have sent theirs (at most GATE_LIMIT seconds), sends a GATE document saying how
many had arrived and whether the gate opened, then chunks "1 " .. "COUNT-1 " with PAUSE_MS
between them, and completes. The gate makes the overlap a matter of counts, not of timing:
while it is shut, every stream of the gate is open at once.
"""

from __future__ import annotations

import asyncio

from sentient_assist import ResponseHandler
from tests.support.agents import ScriptedAgent

GATE_LIMIT = 30.0

_arrived: dict[str, int] = {}
_opened: dict[str, asyncio.Event] = {}


class LoadAgent(ScriptedAgent):
    name = "load"
    description = "Test agent: ScriptedAgent behaviours plus paced streams behind a gate."

    async def _paced(self, session, argument, handler: ResponseHandler) -> None:
        count, pause_ms, gate, size = argument.split(":")
        stream = handler.create_text_stream("FINAL_RESPONSE")
        await stream.emit_chunk("0 ")
        arrived, opened = await _pass_gate(gate, int(size))
        await handler.emit_json("GATE", {"arrived": arrived, "opened": opened})
        for index in range(1, int(count)):
            await asyncio.sleep(int(pause_ms) / 1000)
            await stream.emit_chunk(f"{index} ")
        await handler.complete()


async def _pass_gate(name: str, size: int) -> tuple[int, bool]:
    """Wait (without a task of its own) until `size` streams reached the gate `name`."""
    _arrived[name] = _arrived.get(name, 0) + 1
    opened = _opened.setdefault(name, asyncio.Event())
    if _arrived[name] >= size:
        opened.set()
    try:
        async with asyncio.timeout(GATE_LIMIT):
            await opened.wait()
    except TimeoutError:
        pass
    return _arrived[name], opened.is_set()
