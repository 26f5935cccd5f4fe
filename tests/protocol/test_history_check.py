"""/assist checks a history without building its models (HISTORY_CHECK), keeps it compact
(History) and builds a turn's models when it is read. Each must give what the models give:
the same answer for every history, the same errors for every body, the same models.

The histories are valid turns of every kind, and thousands of them changed at random in one
place (a value swapped for a near miss, a key dropped or added), from a fixed seed."""

from __future__ import annotations

import copy
import gc
import json
import random
from typing import Annotated, Any

import pytest
from pydantic import Field, TypeAdapter, ValidationError
from ulid import ULID

from sentient_assist.protocol import conventions as names
from sentient_assist.protocol.history import VALID_TURN_READER, CompactRequest, History, interactions_of_valid
from sentient_assist.protocol.request import (
    HISTORY_CHECK,
    MAX_INTERACTIONS,
    MAX_RESPONSES,
    Interaction,
    Request,
    fresh_ulid,
    fresh_ulid_str,
    ulid_of_valid,
)
from sentient_assist.protocol.ulid import is_ulid
from sentient_assist.runtime import pauses
from sentient_assist.runtime.session import Interactions, Session

MODELS = TypeAdapter(Annotated[list[Interaction], Field(max_length=MAX_INTERACTIONS, fail_fast=True)])
COMPACT = TypeAdapter(CompactRequest)
CASES = 4000

PAST = str(ULID.from_timestamp(1_600_000_000))  # 2020
EARLIER = str(ULID.from_timestamp(1_500_000_000))
LATER = str(ULID.from_timestamp(1_700_000_000))
FUTURE = str(ULID.from_timestamp(4_000_000_000))  # 2096


def event(content_type: str, **fields: Any) -> dict:
    return {"content_type": content_type, "source": "agent", **fields}


def turns() -> list[dict]:
    """Valid turns, one of each kind the models take."""
    chat = "01JDQ4Z8M7T3V5X9A2B4C6D8EF"
    part = {"prompt": "hi", "fileIds": ["f1", "f2"]}
    return [
        {"request": {"event": {"chatId": chat, "content": {"request_payload": {"parts": [{"prompt": "q"}]}}}}},
        {
            "request": {
                "sender": "user",
                "recipients": ["agent", "agent", "other"],
                "event": {
                    "id": LATER,
                    "chat_id": chat.lower(),
                    "parent_request_id": PAST,
                    "root_request_id": EARLIER,
                    "content": {"capability": "assist", "request_payload": {"parts": [part, {"prompt": "x"}]}},
                },
            },
            "responses": [
                {"event": event("atomic.textblock", event_name="PLAN", content="a plan", id=PAST.lower())},
                {"event": event("atomic.json", event_name="SOURCES", content={"a": [1, 2.5, None, {"b": True}]})},
                {
                    "sender": "agent",
                    "recipients": None,
                    "event": event(
                        "chunked.text",
                        event_name="FINAL_RESPONSE",
                        stream_id="s1",
                        is_complete=False,
                        content="Hi",
                        metadata={"step": 1, "score": 0.5, "ok": True, "tags": ["web", "x"], "note": "n"},
                    ),
                },
                {
                    "event": event(
                        "chunked.text", event_name="FINAL_RESPONSE", stream_id="s1", is_complete=1, content=""
                    )
                },
                {"event": event("atomic.error", content={"error_message": "oops", "error_code": 404, "details": {}})},
                {"event": event("atomic.error", event_name="error", content={"error_message": "e", "details": None})},
                {"event": event("atomic.json", event_name="ASK_USER", content={"token": "t", "question": "?"})},
                {"event": event("atomic.done", event_name="done", schema_version="1.0", metadata=None, id=None)},
            ],
        },
        {
            "request": {
                "event": {
                    "id": LATER,
                    "chatId": chat,
                    "chat_id": "not used: chatId is",
                    "parent_request_id": EARLIER,
                    "root_request_id": EARLIER,
                    "content": {"request_payload": {"parts": [{"prompt": "p", "files_ids": ["a"], "fileIds": ["b"]}]}},
                }
            },
            "responses": [],
        },
        {
            "request": {"event": {"chatId": chat, "content": {"request_payload": {"parts": []}}}},
            "responses": [{"event": event("atomic.done", stream_id=None, extra=[1, 2])}],
        },
    ]


def near_misses() -> list[Any]:
    """Values one step from what a field takes, or from what it refuses."""
    return [
        None,
        True,
        False,
        0,
        1,
        500,
        1.0,
        1.5,
        float("inf"),
        10**30,
        "",
        "x",
        "true",
        "1",
        "500",
        "1" * 300,
        "x" * 256,
        "x" * 257,
        "x" * 1025,
        "x" * 4096,
        "x" * 4097,
        PAST,
        PAST.lower(),
        FUTURE,
        EARLIER,
        LATER,
        "8" + PAST[1:],
        PAST[:-1] + "U",
        PAST + "\n",
        PAST[:-1],
        "atomic.done",
        "atomic.json",
        "chunked.text",
        "atomic.textblock",
        "atomic.error",
        "done",
        "error",
        [],
        ["a"],
        [1],
        ["a"] * 1001,
        ["x" * 4097],
        {},
        {"k": "v"},
        {"error_message": "m"},
        {"parts": []},
        {"request_payload": {"parts": []}},
        {str(i): i for i in range(17)},
        {"x" * 257: 1},
    ]


KEYS = [
    "id",
    "chatId",
    "chat_id",
    "parent_request_id",
    "root_request_id",
    "fileIds",
    "files_ids",
    "stream_id",
    "event_name",
    "schema_version",
    "metadata",
    "recipients",
    "sender",
    "responses",
    "content",
    "details",
    "error_code",
    "is_complete",
]


def places(value: Any, path: tuple = ()) -> list[tuple]:
    found = [path]
    if isinstance(value, dict):
        for key, item in value.items():
            found += places(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += places(item, (*path, index))
    return found


def mutated(history: list, rng: random.Random) -> list:
    result = copy.deepcopy(history)
    path = rng.choice(places(result)[1:])
    target = result
    for step in path[:-1]:
        target = target[step]
    last = path[-1]
    choice = rng.random()
    if choice < 0.15 and isinstance(target, dict):
        del target[last]
    elif choice < 0.3 and isinstance(target[last], dict):
        target[last][rng.choice(KEYS)] = rng.choice(near_misses())
    else:
        target[last] = rng.choice(near_misses())
    return result


def accepts(adapter: TypeAdapter, history: list) -> bool:
    try:
        adapter.validate_python(copy.deepcopy(history))
    except ValidationError:
        return False
    return True


def histories(count: int) -> list[list]:
    rng = random.Random(23)
    base = turns()
    cases = [base, *([turn] for turn in base)]
    while len(cases) < count:
        cases.append(mutated(rng.choice(cases[: len(base) + 1]), rng))
        if rng.random() < 0.2:  # twice changed, now and then
            cases[-1] = mutated(cases[-1], rng)
    return cases


def test_the_check_and_the_models_take_the_same_histories():
    mismatches = []
    taken = 0
    for history in histories(CASES):
        models, check = accepts(MODELS, history), accepts(HISTORY_CHECK, history)
        taken += models
        if models != check:
            mismatches.append((models, json.dumps(history, default=str)[:2000]))
    assert not mismatches, mismatches[:3]
    assert CASES // 10 < taken < CASES * 9 // 10  # both kinds, in numbers


def body_of(history: list) -> dict:
    return {
        "query": {"id": PAST, "prompt": "p"},
        "session": {"processor_id": "agent", "activity_id": PAST, "request_id": PAST, "interactions": history},
    }


def errors(adapter: TypeAdapter, document: Any) -> list[tuple] | None:
    try:
        adapter.validate_python(copy.deepcopy(document))
    except ValidationError as exc:
        return [(e["type"], e["loc"], e["msg"]) for e in exc.errors()]
    return None


def test_a_body_with_a_bad_history_gets_the_models_own_errors():
    different = []
    for history in histories(CASES // 2):
        document = body_of(history)
        if errors(COMPACT, document) != errors(TypeAdapter(Request), document):
            different.append(json.dumps(history, default=str)[:2000])
    assert not different, different[:3]


@pytest.mark.parametrize(
    "place",
    [
        ("query", "id"),
        ("session", "processor_id"),
        ("session", "interactions", 2, "request", "event", "id"),
        ("session", "interactions", 3, "responses", 1, "event", "source"),
    ],
)
def test_errors_elsewhere_in_the_body_come_with_the_history_s_in_order(place):
    history = [turns()[0]] * 3 + [{**turns()[1], "responses": turns()[1]["responses"] * 3}]
    document = body_of(history)
    target = document
    for step in place[:-1]:
        target = target[step]
    target[place[-1]] = 7
    document["query"]["prompt"] = None  # and one more, before the history
    expected = errors(TypeAdapter(Request), document)
    assert expected is not None and len(expected) >= 2
    assert errors(COMPACT, document) == expected


@pytest.mark.parametrize(
    "history",
    [
        [{"request": {}}] * 3,
        [turns()[0]] * (MAX_INTERACTIONS + 1),
        [turns()[0]] * (MAX_INTERACTIONS + 1) + ["bad"],
        [turns()[0]] * 5 + ["bad"] + [turns()[0]] * MAX_INTERACTIONS,
        [{**turns()[0], "responses": [{"event": event("atomic.done")}] * (MAX_RESPONSES + 1)}],
        [{**turns()[0], "responses": [{"event": event("atomic.done")}] * 500 + [{"event": {}}]}],
        [{"request": 5, "responses": [{"event": {}}] * 3}],
    ],
    ids=["3 bad", "too many", "too many, last bad", "bad then too many", "too many answers", "last answer bad", "bad"],
)
def test_long_bad_histories_get_the_models_own_errors(history):
    document = body_of(history)
    assert errors(COMPACT, document) == errors(TypeAdapter(Request), document) is not None


def normalized(dumped: list[dict], history: list[dict]) -> list[dict]:
    """The models' dump, less the ids made for what came without one (checked to be ULIDs)."""
    for interaction, turn in zip(dumped, history, strict=True):
        request = interaction["request"]["event"]
        if "id" not in turn["request"]["event"]:
            made = request.pop("id")
            assert is_ulid(made)
            if turn["request"]["event"].get("root_request_id") is None:
                assert request.pop("root_request_id") == made
        for response, sent in zip(interaction["responses"], turn.get("responses", []), strict=True):
            if sent["event"].get("id") is None:
                assert is_ulid(response["event"].pop("id"))
    return dumped


def test_a_history_kept_compact_builds_the_models_the_request_would_have():
    history = turns() * 3
    expected = Request.model_validate(body_of(history)).session.interactions
    compact = COMPACT.validate_python(body_of(history)).session.interactions
    assert isinstance(compact, History) and len(compact) == len(history)
    built = list(compact)
    assert [type(i) for i in built] == [Interaction] * len(history)
    assert normalized([i.model_dump() for i in built], history) == normalized(
        [i.model_dump() for i in expected], history
    )
    for mine, theirs in zip(built, expected, strict=True):
        assert mine.request.event.model_fields_set == theirs.request.event.model_fields_set
        assert mine.model_fields_set == theirs.model_fields_set
        assert isinstance(mine.request.event.id, ULID) and isinstance(mine.request.event.root_request_id, ULID)
        assert [type(r.event) for r in mine.responses] == [type(r.event) for r in theirs.responses]
        assert mine.model_dump_json()  # the serializers take them as they take the models' own


def test_a_history_builds_what_is_read_and_keeps_nothing():
    history = COMPACT.validate_python(body_of(turns() * 50)).session.interactions
    assert isinstance(history, History)
    assert history[-1].request.event.prompt == ""
    assert history[1] is not history[1]  # built each time: whoever reads one keeps it
    assert [i.request.event.prompt for i in history[2:6]] == [i.request.event.prompt for i in list(history)[2:6]]
    assert len(history[::50]) == 4 and history[-200].request.event.prompt == "q"
    with pytest.raises(IndexError):
        history[200]
    # About what the request's JSON takes, far less than the models.
    assert history.nbytes < 1.1 * len(json.dumps(turns() * 50))


def test_the_garbage_collector_is_paused_only_while_a_history_is_made_or_read():
    history = COMPACT.validate_python(body_of(turns())).session.interactions
    list(history)
    assert gc.isenabled()
    gc.disable()
    try:
        list(COMPACT.validate_python(body_of(turns())).session.interactions)
        assert not gc.isenabled()  # left as it was found
    finally:
        gc.enable()


def test_interactions_read_a_compact_history_as_a_list():
    history = turns() * 5
    session = Session(COMPACT.validate_python(body_of(history)).session)
    interactions = session.get_interactions()
    assert isinstance(interactions, Interactions) and len(interactions) == 20
    assert session.get_interactions() is interactions  # while it is held
    last = interactions[-1]
    assert interactions[19] is last and interactions[-1] is last  # what was read is kept
    everything = list(interactions)
    assert everything[-1] is last and everything == interactions == interactions[:]
    assert interactions.index(last) == 19 and last in interactions and interactions.count(last) == 1
    assert [i.request.event.prompt for i in reversed(interactions)][:2] == ["", "p"]
    assert len(interactions + [last]) == 21 and len([last] + interactions) == 21  # noqa: RUF005
    assert session.session_object.interactions == everything


async def test_interactions_of_a_compact_history_iterate_with_async_for():
    session = Session(COMPACT.validate_python(body_of(turns())).session)
    assert [i.request.event.prompt async for i in session.get_interactions()] == ["q", "hi\nx", "p", ""]


def test_what_an_agent_drops_is_freed_and_what_it_changes_stays():
    session = Session(COMPACT.validate_python(body_of(turns() * 5)).session)
    first = session.get_interactions()
    first[0]
    del first
    gc.collect()
    again = session.get_interactions()
    assert again._built == {}  # read afresh: nothing was kept
    again.append(again[0])
    del again
    gc.collect()
    changed = session.get_interactions()
    assert len(changed) == 21  # a change stays: the session keeps what was changed
    changed.pop()
    assert len(session.get_interactions()) == 20


def test_a_session_of_models_is_as_before():
    models = Request.model_validate(body_of(turns())).session
    assert models is not None
    session = Session(models)
    assert session.session_object is models
    assert session.get_interactions() is session.get_interactions()
    assert list(session.get_interactions()) == models.interactions


def test_fresh_ids_are_ulids_that_only_increase():
    made = [fresh_ulid_str() for _ in range(3000)] + [str(fresh_ulid()) for _ in range(3000)]
    made += [fresh_ulid_str() for _ in range(10)]
    assert made == sorted(made) and len(set(made)) == len(made)
    assert all(str(ULID.from_str(text)) == text for text in made[::7])
    assert abs(ULID.from_str(made[-1]).timestamp - ULID().timestamp) < 5


def test_a_valid_ulid_decodes_as_python_ulid_decodes_it():
    for _ in range(500):
        text = str(ULID.from_int(random.getrandbits(128)))
        assert ulid_of_valid(text) == ULID.from_str(text) == ulid_of_valid(text.lower())


def test_the_build_knows_every_function_of_the_models():
    # A function added to the models' validation must be given its twin in the build: without
    # it the module does not import (TypeError), rather than skip a check or a default.
    assert interactions_of_valid(turns())[1].request.event.parent_request_id == ULID.from_str(PAST)


def with_event(**fields: Any) -> list[dict]:
    return [{**turns()[0], "responses": [{"event": {"source": "agent", **fields}}]}]


def with_request(**fields: Any) -> list[dict]:
    request = {"chatId": PAST, "content": {"request_payload": {"parts": [{"prompt": "q"}]}}, **fields}
    return [{"request": {"event": {k: v for k, v in request.items() if v is not ...}}}]


def done(**fields: Any) -> list[dict]:
    return with_event(content_type="atomic.done", **fields)


def chunk(**fields: Any) -> list[dict]:
    own = {"event_name": "F", "stream_id": "s", "is_complete": False, "content": "", **fields}
    return with_event(content_type="chunked.text", **own)


def part(**fields: Any) -> list[dict]:
    return [
        {"request": {"event": {"chatId": PAST, "content": {"request_payload": {"parts": [{"prompt": "q", **fields}]}}}}}
    ]


# Where the models' checks are made in Python, each next to its twin in the check.
EDGES = {
    "a done's stream id, numeric and too long": done(stream_id="1" * 300),
    "a done's stream id, a number": done(stream_id=5),
    "a done's stream id, as long as a name may be": done(stream_id="x" * 256),
    "a done's stream id, a list": done(stream_id=["x" * 300]),
    "an event name too long": with_event(content_type="atomic.textblock", event_name="x" * 257, content=""),
    "an error's event name too long": with_event(content_type="atomic.error", event_name="x" * 300, content={}),
    "a source too long": done(source="x" * 257),
    "a schema version, a number": done(schema_version=5),
    "a metadata text, an integer too long": done(metadata={"k": "1" * 4100}),
    "a metadata text, a number too long": done(metadata={"k": "1" * 4100 + ".5"}),
    "a metadata text, a boolean": done(metadata={"k": "true"}),
    "a metadata text, numeric": done(metadata={"k": "12"}),
    "a metadata list with a number": done(metadata={"k": ["a", 1]}),
    "a metadata list too long": done(metadata={"k": ["a"] * 1001}),
    "a metadata list of long texts": done(metadata={"k": ["x" * 4097]}),
    "metadata of 16 keys": done(metadata={str(i): i for i in range(16)}),
    "metadata of 17 keys": done(metadata={str(i): i for i in range(17)}),
    "a metadata key too long": done(metadata={"x" * 257: 1}),
    "a metadata value null": done(metadata={"k": None}),
    "a metadata value an object": done(metadata={"k": {}}),
    "a metadata value NaN": done(metadata={"k": float("nan")}),
    "metadata a list": done(metadata=[]),
    "a chunk's is_complete 'yes'": chunk(is_complete="yes"),
    "a chunk's is_complete 'maybe'": chunk(is_complete="maybe"),
    "a chunk's stream id too long": chunk(stream_id="x" * 257),
    "a chunk without its stream id": with_event(content_type="chunked.text", event_name="F", is_complete=0, content=""),
    "an error code '404'": with_event(content_type="atomic.error", content={"error_message": "m", "error_code": "404"}),
    "an error code 1.5": with_event(content_type="atomic.error", content={"error_message": "m", "error_code": 1.5}),
    "an error's details a list": with_event(content_type="atomic.error", content={"error_message": "m", "details": []}),
    "a document's content a list": with_event(content_type="atomic.json", event_name="D", content=[]),
    "an event id in lower case": done(id=PAST.lower()),
    "an event id empty": done(id=""),
    "an event id with a newline": done(id=PAST + "\n"),
    "no content type": with_event(event_name="done"),
    "a done named error": done(event_name="error"),
    "a parent and no root": with_request(id=LATER, parent_request_id=PAST),
    "a parent after the id": with_request(id=PAST, parent_request_id=LATER, root_request_id=EARLIER),
    "a parent equal to the id": with_request(id=PAST, parent_request_id=PAST, root_request_id=EARLIER),
    "a root after the parent": with_request(id=LATER, parent_request_id=EARLIER, root_request_id=PAST),
    "a parent in the future, no id": with_request(parent_request_id=FUTURE, root_request_id=PAST),
    "a parent in the past, no id": with_request(parent_request_id=PAST, root_request_id=EARLIER),
    "a parent null, a root": with_request(parent_request_id=None, root_request_id=PAST),
    "ids in lower case, in order": with_request(
        id=LATER.lower(), parent_request_id=PAST.lower(), root_request_id=EARLIER.lower()
    ),
    "a chat id in lower case": with_request(chatId=PAST.lower()),
    "a chat id with a newline": with_request(chatId=PAST + "\n"),
    "a chat id by its name": with_request(chatId=..., chat_id=PAST),
    "a chat id both ways, the alias good": with_request(chat_id="bad"),
    "a chat id both ways, the alias bad": with_request(chatId="bad", chat_id=PAST),
    "file ids both ways, the alias good": part(fileIds=["a"], files_ids=[1]),
    "file ids both ways, the alias bad": part(fileIds=[1], files_ids=["a"]),
    "a file id too long": part(fileIds=["x" * 1025]),
    "a capability too long": [
        {
            "request": {
                "event": {
                    **with_request()[0]["request"]["event"],
                    "content": {"capability": "x" * 257, "request_payload": {"parts": []}},
                }
            }
        }
    ],
    "recipients, 1,001": [{"request": {**turns()[0]["request"], "recipients": [str(i) for i in range(1001)]}}],
    "recipients, one 2,000 times": [{"request": {**turns()[0]["request"], "recipients": ["a"] * 2000}}],
    "a sender too long": [{"request": {**turns()[0]["request"], "sender": "x" * 257}}],
    "a turn that is a list": [[]],
    "a turn with more keys": [{**turns()[0], "more": 1}],
    "answers null": [{**turns()[0], "responses": None}],
}


@pytest.mark.parametrize("history", EDGES.values(), ids=EDGES.keys())
def test_the_check_and_the_models_agree_at_each_edge(history):
    assert accepts(HISTORY_CHECK, history) == accepts(MODELS, history)
    document = body_of(history)
    assert errors(COMPACT, document) == errors(TypeAdapter(Request), document)


def pause_turns() -> list[dict]:
    """Turns ended (or not) by a pause, each way the models read one."""
    chat = "01JDQ4Z8M7T3V5X9A2B4C6D8EF"
    ask = event("atomic.json", event_name=names.ASK_USER, content={"question": "?", "token": "tok-ask"})
    interrupt = event("atomic.json", event_name=names.INTERRUPT, content={"token": "tok-int"})
    answers = [
        [{"event": ask}],
        [{"event": interrupt}, {"event": event("atomic.done")}],
        [{"event": ask}, {"event": interrupt}],  # the last one ends the turn
        [{"event": event("atomic.json", event_name=names.ASK_USER, content={"token": 7})}],
        [{"event": event("atomic.json", event_name=names.ASK_USER, content={"token": ""})}],
        [{"event": event("atomic.json", event_name=names.ASK_USER, content={})}, {"event": ask}],
        [{"event": event("atomic.textblock", event_name=names.ASK_USER, content="not a document")}],
        [{"event": event("atomic.json", event_name="ask_user", content={"token": "tok"})}],
        [],
    ]
    parts = [{"prompt": "one"}, {"prompt": ""}, {"prompt": "two\nlines", "fileIds": ["f"]}]
    return [
        {
            "request": {"event": {"chatId": chat, "content": {"request_payload": {"parts": parts[: i % 4]}}}},
            "responses": a,
        }
        for i, a in enumerate(answers)
    ]


def test_what_a_resume_reads_off_a_compact_history_is_what_its_models_say():
    # The prompts and the last turn's pause, read off the records (no turn built), against the
    # same read of the models, for every valid history of the random ones and of the pauses'.
    valid = [h for h in histories(CASES // 4) if accepts(MODELS, h)]
    valid += [[turn] for turn in pause_turns()] + [pause_turns(), turns() + pause_turns()[:1]]
    for history in valid:
        compact = Session(COMPACT.validate_python(body_of(history)).session)
        models = Session(Request.model_validate(body_of(history)).session)
        assert compact.compact_history() is not None and models.compact_history() is None
        assert list(compact.past_prompts()) == list(models.past_prompts())
        assert pauses.pending_token(compact) == pauses.pending_token(models), history


def test_a_resume_builds_no_turn_of_a_compact_history():
    # An 18,000-answer last turn ended by a pause: the token is found and checked, the
    # conversation's digest made, without one model built; a token that does not verify
    # costs its check alone.
    sealer = pauses.sealer_for(b"s" * 32)
    built: list[int] = []

    def build(records: list[Any]) -> list[Interaction]:
        built.append(len(records))
        return interactions_of_valid(records)

    def session_with(token: str) -> Session:
        ask = event("atomic.json", event_name=names.ASK_USER, content={"token": token})
        last = {**turns()[0], "responses": [{"event": event("atomic.done")}] * 18_000 + [{"event": ask}]}
        object_ = COMPACT.validate_python(body_of([*turns(), last])).session
        object_.__dict__["interactions"] = History(
            object_.interactions.records(0, len(object_.interactions)), build, VALID_TURN_READER
        )
        return Session(object_)

    prompts = list(session_with("x").past_prompts())
    pause = pauses.Pause(kind="ask_user", source="agent", digest=pauses.prompts_digest(prompts))
    resumed = pauses.resumption_of(session_with(sealer.issue(pause)), "yes", sealer, "agent")
    assert resumed is not None and resumed.pause.id == pause.id and resumed.answer == "yes"
    with pytest.raises(pauses.PauseRefused):
        pauses.resumption_of(session_with("A" * 64), "yes", sealer, "agent")
    assert built == []
