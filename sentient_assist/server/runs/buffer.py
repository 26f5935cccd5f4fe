"""SharedRuns: where the replicas of a service keep their resumable runs for one another.

A replica keeps each of its runs in this process (KeptRun, for its own readers: no round
trip) and, when the service has a shared store, copies them there as they go, so that a
resume that reaches another replica is served too. The store in use is Redis
(redis_buffer.py); without ASSIST_REDIS_URL there is none and the runs are this process's
alone (the in-process buffer: LocalRuns, memory.py).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

from sentient_assist.server.runs.kept import Item, KeptRun
from sentient_assist.server.runs.source import FrameSource


@dataclass(frozen=True, slots=True)
class SharedRun:
    """What the store says of a run kept by another replica."""

    handle: str
    key_digest: str
    owner: str
    ended: bool


class SharedRuns(ABC):
    """The shared store's side of the runs of every replica."""

    # Whether new runs can be made resumable now (False while the store does not answer).
    up: bool = False
    # What /readyz says of it.
    name: str = "shared"

    @abstractmethod
    async def start(self) -> None:
        """Connect and start the replica's heartbeat; never raises: a store that does not
        answer leaves `up` False (and says so in the log), and is tried again."""

    @abstractmethod
    async def close(self) -> None: ...

    @abstractmethod
    async def reserve(self, handle: str, owner: str) -> None:
        """A place for a new run of `owner` (a key's owner, "" without keys) under its quota of
        the store, before its response starts. Raises QuotaReached; a store that does not
        answer takes no place (the run is then this process's alone)."""

    @abstractmethod
    async def created(self, kept: KeptRun) -> bool:
        """A run of this replica begins: False if the store did not take it (then the run is
        this process's alone)."""

    @abstractmethod
    def appended(self, kept: KeptRun, items: list[Item]) -> None:
        """Frames of a run of this replica, to be written in the next batch."""

    @abstractmethod
    def ended(self, kept: KeptRun) -> None:
        """A run of this replica ended: kept for the retention from now."""

    @abstractmethod
    async def find(self, handle: str) -> SharedRun | None:
        """The run kept under `handle` by any replica; None if unknown or expired.
        Raises StoreUnavailable."""

    @abstractmethod
    async def source(self, run: SharedRun, after_id: str | None, ping: float) -> FrameSource:
        """Its frames after `after_id` (from the first when None), then the live rest.
        Raises UnknownEventId, StoreUnavailable."""

    @abstractmethod
    async def request_stop(self, run: SharedRun) -> None:
        """Ask the replica running `run` to stop it. Raises StoreUnavailable."""

    @abstractmethod
    async def attached_elsewhere(self, handle: str) -> bool:
        """Whether a reader on another replica follows the run now."""
