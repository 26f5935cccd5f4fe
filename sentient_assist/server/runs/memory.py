"""LocalRuns: the resumable runs of this process, by handle, kept for ASSIST_RUN_RETENTION
seconds after `done`, and all together within ASSIST_RUNS_MAX_BYTES_TOTAL (past it the runs
that ended first are dropped first; a running run is bounded by ASSIST_RUN_MAX_BYTES)."""

from __future__ import annotations

import time

from sentient_assist.server.runs.kept import KeptRun


class LocalRuns:
    __slots__ = ("retention", "max_bytes_total", "_runs", "_ended")

    def __init__(self, retention: float, max_bytes_total: int) -> None:
        self.retention = retention
        self.max_bytes_total = max_bytes_total
        self._runs: dict[str, KeptRun] = {}
        self._ended: dict[str, KeptRun] = {}  # in the order they ended: the oldest first

    def __len__(self) -> int:
        return len(self._runs)

    def add(self, kept: KeptRun) -> None:
        self._runs[kept.handle] = kept

    def get(self, handle: str) -> KeptRun | None:
        self.sweep()
        return self._runs.get(handle)

    def ended(self, kept: KeptRun) -> None:
        """`kept` has ended: kept for the retention, then dropped."""
        if kept.handle in self._runs:
            self._ended[kept.handle] = kept
        self.sweep()

    def drop(self, kept: KeptRun) -> None:
        self._runs.pop(kept.handle, None)
        self._ended.pop(kept.handle, None)

    def sweep(self, now: float | None = None) -> None:
        """Drop the ended runs past their retention, and the oldest while over the total."""
        if not self._ended:
            return
        now = time.monotonic() if now is None else now
        expired_before = now - self.retention
        total = self.total_bytes() if len(self._runs) else 0
        for kept in list(self._ended.values()):
            if kept.ended_at > expired_before and total <= self.max_bytes_total:
                break
            total -= kept.nbytes
            self.drop(kept)

    def total_bytes(self) -> int:
        return sum(kept.nbytes for kept in self._runs.values())

    def running(self) -> list[KeptRun]:
        return [kept for kept in self._runs.values() if not kept.ended]
