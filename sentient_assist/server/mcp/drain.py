"""SIGTERM and the mcp SDK's event streams: a call in flight gets ASSIST_SHUTDOWN_GRACE, as an
/assist stream does.

The SDK answers a call of the 2025 handshake era with an event stream of sse-starlette's, and
sse-starlette ends every such stream of the process at once on SIGTERM: the call's client saw
its request fail, and the agent was cut short. sse-starlette's own switch for streams that are
not resumable (`AppStatus.disable_automatic_graceful_drain`) leaves the ending of streams to
the service. Ours end when their runs do: at the latest when the grace has passed, with a 503
result, sent within the write grace. Then `AppStatus.should_exit` is set, as sse-starlette asks
of whoever turns the switch, for any other stream of sse-starlette's in the process (a user's
own route; an A2A stream, whose own grace then starts, bounded by its route's time limit).

This is the one module that touches `AppStatus`, which sse-starlette does not export: the mcp
extra bounds sse-starlette below its next minor version, and tests/server/test_framework_internals.py
fails, naming its version, when what is used here changes.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from sse_starlette.sse import AppStatus

from sentient_assist.server.draining import is_draining

# How often a process looks for the SIGTERM that starts its drain (sse-starlette's own watcher
# looks as often).
POLL_SECONDS = 0.5


@asynccontextmanager
async def streams_drained_after(seconds: float) -> AsyncIterator[None]:
    """While the app runs, sse-starlette's streams are ended `seconds` after SIGTERM, not at it."""
    AppStatus.disable_automatic_graceful_drain()  # type: ignore[no-untyped-call]
    drain = asyncio.create_task(_end_streams_after(seconds), name="sse streams drained after the grace")
    try:
        yield
    finally:
        drain.cancel()
        AppStatus.enable_automatic_graceful_drain_mode()  # type: ignore[no-untyped-call]


async def _end_streams_after(seconds: float) -> None:
    while not is_draining():  # noqa: ASYNC110 - uvicorn sets a flag on SIGTERM, no event to await
        await asyncio.sleep(POLL_SECONDS)
    await asyncio.sleep(seconds)
    AppStatus.should_exit = True
