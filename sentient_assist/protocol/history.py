"""A conversation as the wire knows it: Message, and the conversions between a session's
interactions and messages (docs/protocol.md, "A turn of history"); and `History`, a
session's past turns as a request brought them, kept compact until they are read. No I/O.

The facade sends messages as a session's interactions; agents (LLM agents, orchestration)
read a session's interactions back as messages.
"""

from __future__ import annotations

import gc
import marshal
import operator
import threading
from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from itertools import accumulate
from typing import Annotated, Any, Literal, NamedTuple, cast, overload

from pydantic import BaseModel, ConfigDict, ValidationError, ValidatorFunctionWrapHandler, WrapValidator
from pydantic_core import CoreSchema, ErrorDetails, SchemaValidator, core_schema
from ulid import ULID

from sentient_assist.protocol import events as _events
from sentient_assist.protocol import ulid as _ulid
from sentient_assist.protocol.conventions import ASK_USER, FINAL_RESPONSE, INTERRUPT, THINKING
from sentient_assist.protocol.events import DoneEvent, ResponseEventAdapter, TextBlockEvent, TextChunkEvent
from sentient_assist.protocol.json_value import JSONObject
from sentient_assist.protocol.request import (
    HISTORY_CHECK,
    AssistRequest,
    AssistRequestContent,
    AssistRequestContentPart,
    AssistRequestContentParts,
    Interaction,
    Request,
    RequestMessage,
    ResponseMessage,
    _check_event_sizes,
    _InteractionShape,
    fresh_ulid_str,
    fresh_ulid_strs,
    ulid_of_valid,
)


class Message(BaseModel):
    """One turn of a conversation. An assistant turn keeps the wire events it was made of,
    so that history sent back is what Sentient Chat would send."""

    model_config = ConfigDict(frozen=True)

    role: Literal["user", "assistant"]
    content: str
    events: tuple[JSONObject, ...] = ()


def user_text(interaction: Interaction) -> str:
    """The prompts of the request's parts, joined with newlines (attachments are not replayed)."""
    return interaction.request.event.prompt


def assistant_text(interaction: Interaction) -> str:
    """The FINAL_RESPONSE content of the answer; when there is none, its text blocks and
    other text streams in order (THINKING never counts)."""
    final: list[str] = []
    other: list[str] = []
    for response in interaction.responses:
        event = response.event
        if isinstance(event, (TextChunkEvent, TextBlockEvent)) and event.event_name != THINKING:
            (final if event.event_name == FINAL_RESPONSE else other).append(event.content)
    return "".join(final) if final else "".join(other)


def messages_from(interactions: Iterable[Interaction], *, keep_events: bool = True) -> tuple[Message, ...]:
    """A session's interactions as messages: the inverse of interactions_from(). Without
    `keep_events` an answer is its text only: all a model's chat history needs, for far less work."""
    messages: list[Message] = []
    for interaction in interactions:
        messages.append(Message(role="user", content=user_text(interaction)))
        if interaction.responses:
            events = ()
            if keep_events:
                events = tuple(ResponseEventAdapter.dump_python(r.event, mode="json") for r in interaction.responses)
            messages.append(Message(role="assistant", content=assistant_text(interaction), events=events))
    return tuple(messages)


def as_messages(history: Iterable[Message | Mapping[str, object]]) -> tuple[Message, ...]:
    """Messages, or dicts shaped like them (`{"role": "user", "content": "hi"}`)."""
    return tuple(item if isinstance(item, Message) else Message.model_validate(item) for item in history)


def interactions_from(messages: tuple[Message, ...], chat_id: ULID, source: str) -> list[Interaction]:
    """One interaction per user message, answered by the assistant message that follows it."""
    interactions: list[Interaction] = []
    for position, message in enumerate(messages):
        if message.role == "user":
            interactions.append(Interaction(request=RequestMessage(event=_request(message.content, chat_id))))
        elif not interactions or interactions[-1].responses:
            raise ValueError(f"history[{position}]: an assistant message must follow a user message")
        else:
            events = message.events or _events_for_text(message.content, source)
            interactions[-1].responses = [
                ResponseMessage(event=ResponseEventAdapter.validate_python(event)) for event in events
            ]
    return interactions


def _request(prompt: str, chat_id: ULID) -> AssistRequest:
    part = AssistRequestContentPart(prompt=prompt, fileIds=[])
    content = AssistRequestContent(request_payload=AssistRequestContentParts(parts=[part]))
    return AssistRequest(id=ULID(), chatId=chat_id, content=content)


def _events_for_text(text: str, source: str) -> list[JSONObject]:
    """An assistant message written by hand: its text as the answer stream it would have been."""
    answer = TextChunkEvent(
        event_name=FINAL_RESPONSE, source=source, stream_id=str(ULID()), is_complete=False, content=text
    )
    events = (answer, answer.closing_chunk(), DoneEvent(source=source))
    return [ResponseEventAdapter.dump_python(event, mode="json") for event in events]


@contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic garbage collector held off while a history is parsed, checked or built:
    tens of thousands of objects that all live on while it runs, which the collector would
    otherwise go through again and again (a 1 MB history: over 150 collections, one or two
    of them of the whole heap, more CPU than the work itself). It runs as usual afterwards;
    nothing here makes a reference cycle."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


class TurnReader(NamedTuple):
    """What the service reads of a compact turn's record without building its models, for a
    pause to resume (runtime/pauses.py): each face keeps its records in a form of its own."""

    prompt: Callable[[Any], str]
    """The user's turn, as `AssistRequest.prompt` has it: every part's prompt, joined with newlines."""
    pause: Callable[[Any], tuple[str, str] | None]
    """The pause that ended the turn, as its last ASK_USER or INTERRUPT event has it: (that
    event's name, its token); None when the turn has no such event or its token is no string."""


class History(Sequence[Interaction]):
    """A session's past turns, validated, kept compact: each turn one `marshal` record of
    what describes it (for /assist, the turn as the request's JSON had it), all in one bytes
    object, rather than as the models it makes (a 1 MB history of 8,500 turns is about 1 MB
    here, against 27 MB of models). A turn's models are built when it is read (`history[i]`,
    a slice, iteration), by `build`, and belong to whoever reads them: nothing is kept here.
    What a resume needs (the prompts, the last turn's pause) `reader` reads off the records.
    runtime/session.py's `Interactions` is what an agent gets, and keeps what it read."""

    __slots__ = ("_records", "_offsets", "_build", "_reader", "__weakref__")

    # Turns built at a time when a history is iterated: a reader that keeps none holds few.
    ITERATION_CHUNK = 256

    def __init__(
        self, turns: Iterable[Any], build: Callable[[list[Any]], list[Interaction]], reader: TurnReader
    ) -> None:
        with collector_paused():
            records = [marshal.dumps(turn) for turn in turns]
        self._offsets = array("I", accumulate(map(len, records), initial=0))
        self._records = b"".join(records)
        self._build = build
        self._reader = reader

    @property
    def nbytes(self) -> int:
        """What it holds: its records and their offsets."""
        return len(self._records) + self._offsets.itemsize * len(self._offsets)

    def __len__(self) -> int:
        return len(self._offsets) - 1

    def records(self, start: int, stop: int) -> list[Any]:
        """The records of turns `start` to `stop` (not included), as `turns` gave them."""
        view, offsets = memoryview(self._records), self._offsets
        return [marshal.loads(view[offsets[i] : offsets[i + 1]]) for i in range(start, stop)]

    def prompts(self) -> Iterator[str]:
        """Each turn's prompt, oldest first, read off the records: no model is built."""
        prompt_of, view, offsets = self._reader.prompt, memoryview(self._records), self._offsets
        for i in range(len(self)):
            yield prompt_of(marshal.loads(view[offsets[i] : offsets[i + 1]]))

    def last_pause(self) -> tuple[str, str] | None:
        """The pause that ended the last turn (`TurnReader.pause`), read off its record."""
        if not self:
            return None
        [record] = self.records(len(self) - 1, len(self))
        return self._reader.pause(record)

    def build(self, start: int = 0, stop: int | None = None) -> list[Interaction]:
        """New models of turns `start` to `stop` (default: the last), in one pass."""
        stop = len(self) if stop is None else stop
        if start >= stop:
            return []
        with collector_paused():
            return self._build(self.records(start, stop))

    @overload
    def __getitem__(self, index: int) -> Interaction: ...

    @overload
    def __getitem__(self, index: slice) -> list[Interaction]: ...

    def __getitem__(self, index: int | slice) -> Interaction | list[Interaction]:
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if step == 1:
                return self.build(start, max(start, stop))
            return [self[i] for i in range(start, stop, step)]
        position = operator.index(index)
        if position < 0:
            position += len(self)
        if not 0 <= position < len(self):
            raise IndexError("history index out of range")
        return self.build(position, position + 1)[0]

    def __iter__(self) -> Iterator[Interaction]:
        for start in range(0, len(self), self.ITERATION_CHUNK):
            yield from self.build(start, min(len(self), start + self.ITERATION_CHUNK))

    def __repr__(self) -> str:
        return f"<History of {len(self)} turns in {self.nbytes} bytes>"


# Building a history's models from JSON already checked (HISTORY_CHECK), in Rust: the models'
# own schema, with each Python check that has already been made left out, a ULID decoded
# without python-ulid's Python loop, and fresh ids for what came without one (an answer's
# given before the build, a run of them at once: `_give_ids`). A function the models gain
# that is not known here stops the first build (`TypeError`) rather than being skipped.
def _event_id_of_valid(value: str | None) -> str:
    return fresh_ulid_str() if value is None else value.upper()


def _stamp_root_request_id(request: AssistRequest) -> AssistRequest:
    if request.__dict__["root_request_id"] is None:
        request.__dict__["root_request_id"] = request.__dict__["id"]
        request.__pydantic_fields_set__.add("root_request_id")
    return request


def _trusted_functions() -> dict[Callable[..., object], Callable[..., object] | None]:
    """Each Python function of the models' validation, and what the build does instead
    (None: nothing; its schema is used as it is)."""
    stamp = AssistRequest.__pydantic_decorators__.model_validators["_stamp_root_request_id"].func
    return {
        _ulid._to_ulid: ulid_of_valid,
        _ulid._to_event_id: _event_id_of_valid,
        _ulid._to_ulid_str: str.upper,
        _check_event_sizes: None,
        _events._check_metadata: None,
        stamp: _stamp_root_request_id,
    }


def _trusting(
    node: object, functions: Mapping[Callable[..., object], Callable[..., object] | None], classes: set[type]
) -> object:
    if isinstance(node, list):
        return [_trusting(item, functions, classes) for item in node]
    if not isinstance(node, dict):
        return node
    kind = node.get("type")
    if kind in ("model", "dataclass") and "__pydantic_complete__" in vars(node["cls"]):
        classes.add(node["cls"])
    function = node.get("function")
    if kind in ("function-plain", "function-before", "function-after", "function-wrap") and isinstance(function, dict):
        original = function["function"]
        if original not in functions:
            raise TypeError(f"the history build does not know {original!r}: give it its twin in {__name__}")
        replacement = functions[original]
        if replacement is None:
            return _trusting(node["schema"], functions, classes)
        node = {**node, "function": {"type": "no-info", "function": replacement}}
    return {
        key: value if key == "serialization" else _trusting(value, functions, classes) for key, value in node.items()
    }


_trusted: dict[type[BaseModel], SchemaValidator] = {}
_trusted_lock = threading.Lock()


def _trusted_validator(model: type[BaseModel] = Interaction) -> SchemaValidator:
    """The build of a list of `model` (Interaction) from JSON that HISTORY_CHECK passed."""
    with _trusted_lock:
        validator = _trusted.get(model)
        if validator is None:
            classes: set[type] = set()
            schema = cast(CoreSchema, _trusting(model.__pydantic_core_schema__, _trusted_functions(), classes))
            # pydantic-core reuses a model's own validator for a nested model of a complete
            # class; marked incomplete while this one is made, each model is built from `schema`.
            for cls in classes:
                type.__setattr__(cls, "__pydantic_complete__", False)
            try:
                validator = _trusted[model] = SchemaValidator(core_schema.list_schema(schema))
            finally:
                for cls in classes:
                    type.__setattr__(cls, "__pydantic_complete__", True)
        return validator


# Made as the module is imported (a few ms): before any thread may use the models, and so
# that a function of theirs the build does not know stops the import, not a request.
_trusted_validator(Interaction)

# Ids a build makes at a time, at most, for the answers that came without one.
_IDS_PER_BUILD = 1 << 20


def _give_ids(responses: Iterable[object], next_id: Callable[[], str] | None = None) -> Callable[[], str] | None:
    """Fresh ids, made in one run, for the answers (as the JSON had them) that came without one."""
    for response in responses:
        if isinstance(response, dict):
            event = response["event"]
            if event.get("id") is None:
                next_id = next_id or fresh_ulid_strs(_IDS_PER_BUILD)
                event["id"] = next_id()
    return next_id


def interactions_of_valid(turns: list[Any]) -> list[Interaction]:
    """The models of past turns as a request's JSON has them, once HISTORY_CHECK has passed
    them: what `list[Interaction]` would make of them, at a fraction of the cost. `turns`
    are the build's own (they are given the ids their answers lack)."""
    next_id = None
    for turn in turns:
        next_id = _give_ids(turn.get("responses", ()), next_id)
    with collector_paused():
        built: list[Interaction] = _trusted_validator().validate_python(turns)
    return built


def _prompt_of_valid(turn: _InteractionShape) -> str:
    """A turn's prompt, as a request's JSON has it once HISTORY_CHECK has passed it."""
    return "\n".join(part["prompt"] for part in turn["request"]["event"]["content"]["request_payload"]["parts"])


_PAUSE_NAMES = frozenset((ASK_USER, INTERRUPT))


def _pause_of_valid(turn: dict[str, Any]) -> tuple[str, str] | None:
    """The pause that ended a turn, as a request's JSON has it once HISTORY_CHECK has passed it."""
    for response in reversed(turn.get("responses") or ()):
        event = response["event"]
        if event.get("content_type") == _events.JSON and event.get("event_name") in _PAUSE_NAMES:
            token = event["content"].get("token")
            return (event["event_name"], token) if isinstance(token, str) and token else None
    return None


# What a pause's resume reads of /assist's records (the turns as the request's JSON had them).
VALID_TURN_READER = TurnReader(prompt=_prompt_of_valid, pause=_pause_of_valid)


# /assist's body: a `Request`, its history checked by HISTORY_CHECK and kept as a History.
def _placeholders() -> tuple[Interaction, ResponseMessage]:
    turn = Interaction.model_validate(
        {"request": {"event": {"chatId": str(ULID()), "content": {"request_payload": {"parts": []}}}}}
    )
    return turn, ResponseMessage(event=DoneEvent(source="placeholder"))


_TURN, _RESPONSE = _placeholders()


def _as_checked(
    value: Mapping[str, object], session: Mapping[str, object], turns: list[object], errors: list[ErrorDetails]
) -> dict[str, object]:
    """The body with every turn HISTORY_CHECK found valid, and every answer of the first bad
    turn it found valid, swapped for a valid model (which the models take as it is), lists
    kept at their lengths: the models report the same errors for it as for the whole body
    (a list stops at its first bad item), for the cost of one turn and one event."""
    first, answer = None, None
    for error in errors:
        loc = error["loc"]
        if loc and isinstance(loc[0], int):
            first = loc[0]
            if len(loc) > 2 and loc[1] == "responses" and isinstance(loc[2], int):
                answer = loc[2]
    checked: list[object] = [_TURN] * len(turns)
    if first is not None:
        turn = turns[first]
        if isinstance(turn, dict) and isinstance(responses := turn.get("responses"), list):
            kept: list[object] = [_RESPONSE] * len(responses)
            if answer is not None:
                kept[answer] = responses[answer]
            turn = {**turn, "responses": kept}
        checked[first] = turn
    return {**value, "session": {**session, "interactions": checked}}


def keep_history_compact(value: object, handler: ValidatorFunctionWrapHandler) -> object:
    """/assist's body as `Request` validates it, same answer and same errors, with its
    session's history checked by HISTORY_CHECK (no models built) and kept as a `History`."""
    session = value.get("session") if isinstance(value, dict) else None
    turns = session.get("interactions") if isinstance(session, dict) else None
    if not isinstance(turns, list) or not turns:
        return handler(value)
    assert isinstance(value, dict) and isinstance(session, dict)
    with collector_paused():
        try:
            HISTORY_CHECK.validate_python(turns)
        except ValidationError as problems:
            errors = problems.errors(include_url=False, include_context=False, include_input=False)
            handler(_as_checked(value, session, turns, errors))  # raises the models' own errors
            return handler(value)  # only if HISTORY_CHECK and the models disagree: the models' answer
        body = handler({**value, "session": {**session, "interactions": []}})
        assert isinstance(body, Request) and body.session is not None
        body.session.__dict__["interactions"] = History(turns, interactions_of_valid, VALID_TURN_READER)
    return body


CompactRequest = Annotated[Request, WrapValidator(keep_history_compact)]
