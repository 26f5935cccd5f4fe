"""SessionPerLoop: one aiohttp ClientSession (and its connection pool) per running event loop.

An aiohttp session belongs to the loop it was made in, and warns if it is collected unclosed.
A model lives longer than a loop (tests run one loop per test; the facade's `run_sync` one per
call), so each loop gets its own session, made on first use and closed when that loop shuts down
(asyncio.run, uvicorn and pytest-asyncio close a loop's async generators first), or soon after
its owner is collected.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator, Callable

import aiohttp

_Held = tuple[aiohttp.ClientSession, AsyncIterator[None]]


class SessionPerLoop:
    """The sessions of one owner, by loop. `session()` is the running loop's; `aclose()` closes
    them all."""

    def __init__(self, owner: object, new_session: Callable[[], aiohttp.ClientSession]) -> None:
        # `new_session` must not hold `owner`: this object outlives it until the finalizer has run.
        self._new_session = new_session
        self._held: dict[asyncio.AbstractEventLoop, _Held] = {}
        # The finalizer holds this object, so the sessions are never collected unclosed with their owner.
        weakref.finalize(owner, self._close_soon)

    async def session(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        held = self._held.get(loop)
        if held is not None and not held[0].closed:
            return held[0]
        self._forget_ended_loops()
        session = self._new_session()
        guard = _closed_with_the_loop(session)
        await anext(guard)  # now one of the loop's async generators, closed at its shutdown
        self._held[loop] = (session, guard)
        return session

    async def aclose(self) -> None:
        """Close the running loop's session now, and the other loops' soon, in their loops."""
        loop = asyncio.get_running_loop()
        held = self._held.pop(loop, None)
        self._close_soon()
        if held is not None:
            await held[0].close()

    def _close_soon(self) -> None:
        held, self._held = self._held, {}
        for loop, (session, _) in held.items():
            if not loop.is_closed() and not session.closed:
                loop.call_soon_threadsafe(_close_in_a_task, loop, session)

    def _forget_ended_loops(self) -> None:
        for loop in [loop for loop, (session, _) in self._held.items() if loop.is_closed() or session.closed]:
            del self._held[loop]


async def _closed_with_the_loop(session: aiohttp.ClientSession) -> AsyncIterator[None]:
    try:
        yield
    finally:
        await session.close()


_closing: set[asyncio.Task[None]] = set()  # a task the loop holds only weakly could be collected mid-way


def _close_in_a_task(loop: asyncio.AbstractEventLoop, session: aiohttp.ClientSession) -> None:
    task = loop.create_task(session.close())
    _closing.add(task)
    task.add_done_callback(_closing.discard)
