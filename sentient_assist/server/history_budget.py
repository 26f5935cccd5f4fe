"""HistoryBudget: what the conversations held by a service's open runs take together, bounded by
ASSIST_MAX_HISTORY_BYTES_TOTAL. Every face's parsing counts the conversation it builds here."""

from __future__ import annotations

import threading
import weakref

from fastapi import HTTPException

from sentient_assist.protocol.history import History
from sentient_assist.server.limits import RETRY_AFTER_SECONDS

HISTORY_SETTING = "ASSIST_MAX_HISTORY_BYTES_TOTAL"


class HistoryBudget:
    """What the histories of a service's open streams hold together (their compact bytes,
    `History.nbytes`), up to ASSIST_MAX_HISTORY_BYTES_TOTAL. A history is counted from the
    moment its stream is admitted until it is freed (the stream has ended and nothing holds
    it): what is counted is what is held. Past the limit a request with a history gets a 503
    naming the setting, with `Retry-After`; a history larger than the limit by itself, a 413."""

    __slots__ = ("limit", "held", "_lock")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held = 0
        self._lock = threading.Lock()

    def hold(self, history: History, beside: int = 0) -> None:
        """Count `history` until it is freed, or raise the 503 (413) that says why not; `beside`:
        the bytes of what the request's run holds as long beside it (AG-UI's state, say)."""
        size = history.nbytes + beside
        if size > self.limit:
            raise HTTPException(
                413, f"the request's history takes {size} bytes, more than {HISTORY_SETTING} ({self.limit} bytes)"
            )
        with self._lock:
            if self.held + size > self.limit:
                raise HTTPException(
                    503,
                    f"the histories of the open streams are at {HISTORY_SETTING} ({self.limit} bytes); retry shortly",
                    {"Retry-After": RETRY_AFTER_SECONDS},
                )
            self.held += size
        weakref.finalize(history, self._free, size)

    def _free(self, size: int) -> None:
        with self._lock:
            self.held -= size
