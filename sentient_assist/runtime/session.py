"""The session an agent sees: who it is answering as, and the chat's history."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from ulid import ULID

from sentient_assist.protocol.request import Interaction, SessionObject

if TYPE_CHECKING:
    from sentient_assist.runtime.pauses import Resumption


class Interactions(list[Interaction]):
    """The session's past turns, oldest first: iterate with `for` or `async for`.

    The 0.3.0 package returns a plain list while its protocol promises an async
    iterable; this is both, so agents written either way work.
    """

    async def __aiter__(self) -> AsyncIterator[Interaction]:
        for interaction in list.__iter__(self):
            yield interaction


class Session:
    """Read-only view of a request's session."""

    __slots__ = ("_session_object", "_interactions", "resumed")

    def __init__(self, session_object: SessionObject) -> None:
        self._session_object = session_object
        self._interactions = Interactions(session_object.interactions)
        # Set before the agent runs when this request answers a pause: a Resumption
        # (sentient_assist/runtime/pauses.py), with the answer and the state the agent paused with.
        self.resumed: Resumption | None = None

    @classmethod
    def new(cls, processor_id: str) -> Session:
        """A fresh session with no history, for a request that brought none."""
        return cls(SessionObject(processor_id=processor_id, activity_id=ULID(), request_id=ULID()))

    @property
    def processor_id(self) -> str:
        return self._session_object.processor_id

    @property
    def activity_id(self) -> ULID:
        return self._session_object.activity_id

    @property
    def request_id(self) -> ULID:
        return self._session_object.request_id

    @property
    def session_object(self) -> SessionObject:
        return self._session_object

    def get_interactions(self, **kwargs: object) -> Interactions:
        return self._interactions
