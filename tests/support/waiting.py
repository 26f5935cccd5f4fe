"""Waiting for something a server or an agent does in its own time, with a deadline."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable


def wait_until(predicate: Callable[[], object], timeout: float) -> bool:
    """True once `predicate()` is true; False after `timeout` seconds of it being false."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


async def until(predicate: Callable[[], object], timeout: float) -> bool:
    """`wait_until` for a coroutine: the event loop runs on while it waits."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.02)
    return True
