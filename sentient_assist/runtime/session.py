"""The session an agent sees: who it is answering as, and the chat's history."""

from __future__ import annotations

import sys
import weakref
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, MutableSequence, Sequence
from typing import TYPE_CHECKING, Any, SupportsIndex, TypeVar, overload

from ulid import ULID

from sentient_assist.protocol.history import History
from sentient_assist.protocol.request import Interaction, SessionObject

Other = TypeVar("Other")  # what is added to a session's interactions, as to a list

if TYPE_CHECKING:
    from typing import Self

    from sentient_assist.runtime.pauses import Resumption

    # For type checkers, a list: what 0.3.0 returns, and what code written for it (or
    # annotated `list[Interaction]`) takes. At run time, a mutable sequence with every
    # method of a list: a list subclass would be read as a list by C code (pydantic's
    # validators and serializers, for one), which takes a list's items without asking
    # it, and so would not see turns not built yet.
    _Base = list[Interaction]
else:
    _Base = MutableSequence


class Interactions(_Base):
    """The session's past turns, oldest first: every operation of a list, and `for` or
    `async for`.

    The 0.3.0 package returns a plain list while its protocol promises an async iterable;
    this is both, so agents written either way work (`isinstance(..., list)` aside). A
    history that came with a request is kept compact (protocol/history.py's `History`): a
    turn's models are built when it is first read here (`interactions[-1]` builds one turn,
    `len()` none, iterating every one), and kept as long as this object is. Drop it and
    they go: the next `session.get_interactions()` reads them afresh.
    """

    __slots__ = ("_items", "_history", "_built", "_on_change", "__weakref__")

    def __init__(
        self,
        items: Iterable[Interaction] | History = (),
        on_change: Callable[[Interactions], None] | None = None,
    ) -> None:
        # Either the list of the turns, or (until every turn is read) the history and the
        # turns read so far, by position.
        self._history: History | None = items if isinstance(items, History) else None
        self._items: list[Interaction] | None = None if self._history is not None else list(items)
        self._built: dict[int, Interaction] = {}
        self._on_change = on_change

    def _all(self) -> list[Interaction]:
        """The list of every turn, built once (the turns already read are kept as they are)."""
        if self._items is None:
            assert self._history is not None
            items = self._history.build()
            for position, interaction in self._built.items():
                items[position] = interaction
            self._items, self._history, self._built = items, None, {}
        return self._items

    def _changing(self) -> list[Interaction]:
        """The list, about to be changed: the session keeps this object from then on."""
        items = self._all()
        if self._on_change is not None:
            self._on_change(self)
            self._on_change = None
        return items

    def _one(self, index: SupportsIndex) -> Interaction:
        history = self._history
        assert history is not None
        position = index.__index__()
        if position < 0:
            position += len(history)
        if not 0 <= position < len(history):
            raise IndexError("list index out of range")
        interaction = self._built.get(position)
        if interaction is None:
            interaction = self._built[position] = history[position]
        return interaction

    # Reading: a turn alone is built alone; anything else builds them all.
    def __len__(self) -> int:
        return len(self._items) if self._items is not None else len(self._history or ())

    @overload
    def __getitem__(self, index: SupportsIndex) -> Interaction: ...

    @overload
    def __getitem__(self, index: slice) -> list[Interaction]: ...

    def __getitem__(self, index: SupportsIndex | slice) -> Interaction | list[Interaction]:
        if self._items is None and not isinstance(index, slice):
            return self._one(index)
        return self._all()[index]

    def __iter__(self) -> Iterator[Interaction]:
        return iter(self._all())

    def __reversed__(self) -> Iterator[Interaction]:
        return reversed(self._all())

    async def __aiter__(self) -> AsyncIterator[Interaction]:
        for interaction in self._all():
            yield interaction

    def __contains__(self, value: object) -> bool:
        return value in self._all()

    def index(self, value: Interaction, start: SupportsIndex = 0, stop: SupportsIndex = sys.maxsize) -> int:
        return self._all().index(value, start, stop)

    def count(self, value: Interaction) -> int:
        return self._all().count(value)

    def copy(self) -> list[Interaction]:
        return self._all().copy()

    def __add__(self, other: Iterable[Other]) -> list[Interaction | Other]:
        return [*self._all(), *other]

    def __radd__(self, other: Iterable[Other]) -> list[Other | Interaction]:
        return [*other, *self._all()]

    def __mul__(self, times: SupportsIndex) -> list[Interaction]:
        return self._all() * times

    def __rmul__(self, times: SupportsIndex) -> list[Interaction]:
        return self._all() * times

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Interactions):
            return self._all() == other._all()
        if isinstance(other, list):
            return self._all() == other
        return NotImplemented

    def __ne__(self, other: object) -> bool:
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    __hash__ = None  # as a list's: it changes

    def __repr__(self) -> str:
        return repr(self._all())

    # Changing: the session keeps what was changed.
    @overload
    def __setitem__(self, index: SupportsIndex, value: Interaction) -> None: ...

    @overload
    def __setitem__(self, index: slice, value: Iterable[Interaction]) -> None: ...

    def __setitem__(self, index: SupportsIndex | slice, value: Any) -> None:
        self._changing()[index] = value

    def __delitem__(self, index: SupportsIndex | slice) -> None:
        del self._changing()[index]

    def insert(self, index: SupportsIndex, value: Interaction) -> None:
        self._changing().insert(index, value)

    def append(self, value: Interaction) -> None:
        self._changing().append(value)

    def extend(self, values: Iterable[Interaction]) -> None:
        self._changing().extend(values)

    def pop(self, index: SupportsIndex = -1) -> Interaction:
        return self._changing().pop(index)

    def remove(self, value: Interaction) -> None:
        self._changing().remove(value)

    def clear(self) -> None:
        self._changing().clear()

    def reverse(self) -> None:
        self._changing().reverse()

    def sort(self, *, key: Any = None, reverse: bool = False) -> None:
        self._changing().sort(key=key, reverse=reverse)

    def __imul__(self, times: SupportsIndex) -> Self:
        self._changing()[:] = self._all() * times
        return self


class Session:
    """Read-only view of a request's session."""

    __slots__ = ("_session_object", "_history", "_interactions", "_read", "resumed")

    def __init__(self, session_object: SessionObject) -> None:
        self._session_object = session_object
        interactions: Sequence[Interaction] = session_object.interactions  # or a History (below)
        # A history the service kept compact (sentient_assist/protocol/history.py): what an
        # agent reads of it is built when it reads it, and kept while it holds it.
        self._history: History | None = interactions if isinstance(interactions, History) else None
        self._interactions: Interactions | None = None if self._history is not None else Interactions(interactions)
        self._read: weakref.ref[Interactions] | None = None
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
        """The session as the request had it; with a compact history, a copy holding its models."""
        if self._history is None:
            return self._session_object
        return self._session_object.model_copy(update={"interactions": list(self.get_interactions())})

    def get_interactions(self, **kwargs: object) -> Interactions:
        """The chat's past turns. With a history kept compact, the same object as long as
        someone holds it (or has changed it); a turn's models are built when first read."""
        if self._interactions is not None:
            return self._interactions
        interactions = self._read() if self._read is not None else None
        if interactions is None:
            assert self._history is not None
            interactions = Interactions(self._history, on_change=self._keep)
            self._read = weakref.ref(interactions)
        return interactions

    def past_prompts(self) -> Iterator[str]:
        """The past turns' prompts, oldest first: of a compact history the agent has not
        changed, read off its records, no turn built (a pause's conversation, runtime/pauses.py)."""
        if self._interactions is None and self._history is not None:
            return self._history.prompts()
        return (interaction.request.event.prompt for interaction in self.get_interactions())

    def compact_history(self) -> History | None:
        """The history as the request brought it, compact, while the agent has not changed it."""
        return self._history if self._interactions is None else None

    def _keep(self, interactions: Interactions) -> None:
        """An agent changed what it read: from then on, that is the session's history."""
        self._interactions = interactions
