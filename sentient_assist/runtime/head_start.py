"""HeadStart: a run's agent takes its first step before the next request's work begins.

Requests that arrive together are parsed, validated and started on one event loop, each up
to its first wait. A run's agent is a task of its own, so it runs only once every request
ahead of it in the loop's queue has had its turn: of four requests that arrive at once, the
first one's model request went out after all four bodies were read and validated (about
0.4 ms each; bench/README.md, "A real model"). With a head start, a request that arrives
while a run's agent has not yet taken its first step (sent its model request, say) waits
for it, and the requests waiting go on one at a time, in the order they came, each once the
run of the one before has taken its step or the one before waits on something else. The
work is the same, in the order the requests arrived: the first answer starts sooner, and
none later than it would otherwise but for a callback.

What a request waits for is bounded: one step of each run ahead of it, and each waiter is
woken once. Nothing a client sends can hold it: a body still arriving is read after the wait.
"""

from __future__ import annotations

import asyncio
from collections import deque


class HeadStart:
    """The runs of one service whose agent has not yet taken its first step, and the requests
    waiting for them. `started()` when a run's task is created (its first step is then the
    next thing the loop runs of it); `await turn()` before a request's work begins (at the app's
    door, server/head_start.py, and again at admission, for a route in an app of the user's)."""

    __slots__ = ("_starting", "_waiting", "_passing", "_loop")

    def __init__(self) -> None:
        self._starting = 0  # runs whose first step is still to come
        self._waiting: deque[tuple[asyncio.Future[None], object]] = deque()
        # Who was let go (its task, else its waiter), until its step has run; None: nobody is passing.
        self._passing: object | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def started(self) -> None:
        """A run's task was just created: the loop runs its first step before this callback."""
        loop = self._on(asyncio.get_running_loop())
        self._starting += 1
        loop.call_soon(self._stepped)

    async def turn(self) -> None:
        """Return at once when no run is starting and no request is waiting; else once the
        runs started before have taken their first step and the requests ahead have gone on.
        A request let go that takes its turn again in the same step (at the door, then at
        admission: server/head_start.py) goes on: it is the one passing."""
        loop = self._on(asyncio.get_running_loop())
        if not (self._starting or self._waiting or self._passing is not None):
            return
        task = asyncio.current_task()
        if task is not None and self._passing is task and not self._starting:
            return
        waiter = loop.create_future()
        self._waiting.append((waiter, task or waiter))
        await waiter

    def _on(self, loop: asyncio.AbstractEventLoop) -> asyncio.AbstractEventLoop:
        # A service may serve one event loop, then another (asyncio.run, again and again): what
        # was pending on a loop that has stopped will never step.
        if self._loop is not loop:
            self._loop = loop
            self._starting = 0
            self._waiting.clear()
            self._passing = None
        return loop

    def _stepped(self) -> None:
        self._starting -= 1
        self._let_one_go()

    def _let_one_go(self) -> None:
        if self._starting or self._passing is not None or self._loop is None:
            return
        while self._waiting:
            waiter, who = self._waiting.popleft()
            if not waiter.done():  # a waiter cancelled is skipped
                waiter.set_result(None)
                self._passing = who  # until its step has run: a request that comes meanwhile queues
                self._loop.call_soon(self._passed)
                return

    def _passed(self) -> None:
        # After the step of the waiter let go: it has started a run (whose first step lets the
        # next go), or it waits on something else, or it is done; either way the next may go on.
        self._passing = None
        self._let_one_go()
