"""Many deadlines of one duration behind a single timer.

Every deadline is `duration` seconds after it was set, so they fall due in the order
they were set: an ordered dict is the whole schedule, and one timer, armed for the
first, serves them all. A stream waiting for its agent costs a dict entry instead of
an event-loop timer (about 0.5 KB each with uvloop).
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from typing import Callable, Generic, Hashable, TypeVar

K = TypeVar("K", bound=Hashable)
logger = logging.getLogger("app.run")


class Deadlines(Generic[K]):
    """Calls `on_due(key)` `duration` seconds after `set(key)`, unless `clear(key)` came first.

    Bound to the event loop of its first `set()`.
    """

    __slots__ = ("duration", "_on_due", "_due", "_loop", "_timer")

    def __init__(self, duration: float, on_due: Callable[[K], object]) -> None:
        self.duration = duration
        self._on_due = on_due
        self._due: OrderedDict[K, float] = OrderedDict()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._timer: asyncio.TimerHandle | None = None

    def __len__(self) -> int:
        return len(self._due)

    def set(self, key: K) -> None:
        """(Re)start `key`'s deadline: `duration` seconds from now."""
        loop = self._loop
        if loop is None or loop.is_closed():
            loop = self._loop = asyncio.get_running_loop()
            self._timer = None
        due = self._due
        due[key] = loop.time() + self.duration
        due.move_to_end(key)
        if self._timer is None:
            self._timer = loop.call_at(due[next(iter(due))], self._fire)

    def clear(self, key: K) -> None:
        self._due.pop(key, None)

    def _fire(self) -> None:
        self._timer = None
        due = self._due
        now = self._loop.time()  # type: ignore[union-attr]
        while due:
            key, when = next(iter(due.items()))
            if when > now:
                self._timer = self._loop.call_at(when, self._fire)  # type: ignore[union-attr]
                return
            del due[key]
            try:
                self._on_due(key)
            except Exception:  # one failing callback must not leave the others unscheduled
                logger.exception("a deadline callback failed")
