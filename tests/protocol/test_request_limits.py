"""The limits of the request model: every list and every repeated string has one, a bad list
costs one error however long it is, and real Sentient Chat requests stay far inside them."""

from __future__ import annotations

import copy
import json

import pytest
from pydantic import ValidationError
from ulid import ULID

from sentient_assist.protocol import Request
from sentient_assist.protocol.events import MAX_METADATA_KEYS
from sentient_assist.protocol.history import interactions_from
from sentient_assist.protocol.request import (
    MAX_FILE_ID_LENGTH,
    MAX_FILE_IDS,
    MAX_INTERACTIONS,
    MAX_METADATA_LIST_ITEMS,
    MAX_METADATA_TEXT_LENGTH,
    MAX_NAME_LENGTH,
    MAX_PARTS,
    MAX_RECIPIENTS,
    MAX_RESPONSES,
)
from tests.protocol.test_request import assist_request, body, interaction, wire_event

SESSION = ("session",)
REQUEST = ("session", "interactions", 0, "request")
PART = (*REQUEST, "event", "content", "request_payload", "parts", 0)
EVENT = ("session", "interactions", 0, "responses", 0, "event")
HALF_A_MILLION = 500_000


def history_body() -> dict:
    """A body with one of everything that has a limit."""
    event = wire_event("chunked.text", "FINAL_RESPONSE", stream_id="s1", is_complete=False, content="Hi")
    event["metadata"] = {"tags": ["a"], "score": "high"}
    document = body(interaction(responses=[event]))
    document["session"]["interactions"][0]["request"]["event"]["content"]["request_payload"]["parts"][0]["fileIds"] = [
        "file-1"
    ]
    return document


def replaced(document: dict, path: tuple, value) -> dict:
    result = copy.deepcopy(document)
    target = result
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return result


def errors_of(document: dict) -> list[dict]:
    with pytest.raises(ValidationError) as exc:
        Request.model_validate(document)
    return exc.value.errors()


# (path of a string, its limit): at the limit it passes, one character more is an error there.
STRINGS = {
    "processor_id": ((*SESSION, "processor_id"), MAX_NAME_LENGTH),
    "sender": ((*REQUEST, "sender"), MAX_NAME_LENGTH),
    "capability": ((*REQUEST, "event", "content", "capability"), MAX_NAME_LENGTH),
    "fileIds item": ((*PART, "fileIds", 0), MAX_FILE_ID_LENGTH),
    "event_name": ((*EVENT, "event_name"), MAX_NAME_LENGTH),
    "source": ((*EVENT, "source"), MAX_NAME_LENGTH),
    "stream_id": ((*EVENT, "stream_id"), MAX_NAME_LENGTH),
    "schema_version": ((*EVENT, "schema_version"), MAX_NAME_LENGTH),
    "metadata value": ((*EVENT, "metadata", "score"), MAX_METADATA_TEXT_LENGTH),
    "metadata list item": ((*EVENT, "metadata", "tags", 0), MAX_METADATA_TEXT_LENGTH),
}


@pytest.mark.parametrize(("path", "limit"), STRINGS.values(), ids=STRINGS.keys())
def test_a_string_passes_at_its_limit_and_is_refused_past_it_naming_the_field(path, limit):
    Request.model_validate(replaced(history_body(), path, "x" * limit))
    [error] = errors_of(replaced(history_body(), path, "x" * (limit + 1)))
    # Past events are checked before their type is known: no content_type in the location.
    assert (error["loc"], error["type"]) == (path, "string_too_long")
    assert error["msg"] == f"String should have at most {limit} characters"


def test_recipients_are_names_too():
    recipients = (*REQUEST, "recipients")
    Request.model_validate(replaced(history_body(), recipients, ["x" * MAX_NAME_LENGTH]))
    [error] = errors_of(replaced(history_body(), recipients, ["x" * (MAX_NAME_LENGTH + 1)]))
    assert error["loc"][: len(recipients)] == recipients and error["type"] == "string_too_long"


def test_a_metadata_key_is_a_name():
    metadata = (*EVENT, "metadata")
    Request.model_validate(replaced(history_body(), metadata, {"k" * MAX_NAME_LENGTH: "v"}))
    long_key = "k" * (MAX_NAME_LENGTH + 1)
    [error] = errors_of(replaced(history_body(), metadata, {long_key: "v"}))
    assert (error["loc"], error["type"]) == ((*metadata, long_key), "string_too_long")


def test_processor_id_of_a_megabyte_is_refused_at_once():
    [error] = errors_of(replaced(history_body(), (*SESSION, "processor_id"), "p" * 1_000_000))
    assert error["loc"] == (*SESSION, "processor_id")


# (path of a list, its limit, one good item).
LISTS = {
    "interactions": ((*SESSION, "interactions"), MAX_INTERACTIONS, interaction()),
    "responses": (
        ("session", "interactions", 0, "responses"),
        MAX_RESPONSES,
        {"event": wire_event("atomic.done", "done")},
    ),
    "parts": ((*REQUEST, "event", "content", "request_payload", "parts"), MAX_PARTS, {"prompt": "p"}),
    "fileIds": ((*PART, "fileIds"), MAX_FILE_IDS, "file"),
    "metadata list": ((*EVENT, "metadata", "tags"), MAX_METADATA_LIST_ITEMS, "tag"),
}


@pytest.mark.parametrize(("path", "limit", "item"), LISTS.values(), ids=LISTS.keys())
def test_a_list_passes_at_its_limit_and_is_refused_past_it_with_one_error(path, limit, item):
    Request.model_validate(replaced(history_body(), path, [item] * limit))
    [error] = errors_of(replaced(history_body(), path, [item] * (limit + 1)))
    assert (error["loc"], error["type"]) == (path, "too_long")
    assert f"at most {limit} items" in error["msg"]


def test_recipients_are_counted_once_each():
    recipients = (*REQUEST, "recipients")
    distinct = [str(n) for n in range(MAX_RECIPIENTS + 1)]
    Request.model_validate(replaced(history_body(), recipients, distinct[:-1] + distinct[:1]))
    [error] = errors_of(replaced(history_body(), recipients, distinct))
    assert (error["loc"], error["type"]) == (recipients, "too_long")


def test_metadata_past_its_keys_is_refused_before_its_values_are_read():
    metadata = {f"k{n}": None for n in range(HALF_A_MILLION)}
    [error] = errors_of(replaced(history_body(), (*EVENT, "metadata"), metadata))
    assert error["loc"] == (*EVENT, "metadata")
    assert error["msg"] == f"metadata holds at most {MAX_METADATA_KEYS} keys, got {HALF_A_MILLION}"


# Half a million bad items, wherever a list is: one error, at the first.
BAD_LISTS = {
    "interactions": (*SESSION, "interactions"),
    "responses": ("session", "interactions", 0, "responses"),
    "parts": (*REQUEST, "event", "content", "request_payload", "parts"),
    "fileIds": (*PART, "fileIds"),
    "recipients": (*REQUEST, "recipients"),
    "metadata list": (*EVENT, "metadata", "tags"),
}


@pytest.mark.parametrize("path", BAD_LISTS.values(), ids=BAD_LISTS.keys())
def test_a_list_stops_at_its_first_bad_item(path):
    limit = next((limit for p, limit, _ in LISTS.values() if p == path), MAX_RECIPIENTS)
    for count in (3, limit, HALF_A_MILLION):
        errors = errors_of(replaced(history_body(), path, [1] * count))
        assert len(errors) == 1, (count, errors[:3])
        assert errors[0]["loc"][: len(path)] == path


def test_many_bad_interactions_each_with_many_bad_responses_are_one_error():
    document = history_body()
    document["session"]["interactions"] = [{"responses": [1] * 2000} for _ in range(250)]
    errors = errors_of(document)
    assert [error["loc"] for error in errors] == [
        ("session", "interactions", 0, "request"),
        ("session", "interactions", 0, "responses", 0),
    ]


def test_ordinary_bad_fields_are_still_each_named():
    document = replaced(history_body(), ("query", "id"), "nope")
    document = replaced(document, (*SESSION, "activity_id"), 5)
    document = replaced(document, (*EVENT, "is_complete"), "maybe")
    locs = [error["loc"] for error in errors_of(document)]
    assert locs == [("query", "id"), (*SESSION, "activity_id"), (*EVENT, "chunked.text", "is_complete")]


def test_the_json_schema_states_the_limits():
    schema = Request.model_json_schema()["$defs"]
    assert schema["SessionObject"]["properties"]["processor_id"]["maxLength"] == MAX_NAME_LENGTH
    assert schema["SessionObject"]["properties"]["interactions"]["maxItems"] == MAX_INTERACTIONS
    assert schema["Interaction"]["properties"]["responses"]["maxItems"] == MAX_RESPONSES
    assert schema["AssistRequestContentParts"]["properties"]["parts"]["maxItems"] == MAX_PARTS
    assert schema["AssistRequestContentPart"]["properties"]["fileIds"]["maxItems"] == MAX_FILE_IDS


# --- real requests stay far inside ------------------------------------------------------------


def long_chat(turns: int, chunks: int) -> dict:
    """A chat as Sentient Chat sends it: every past answer as the stream of events it was."""
    source = "01JDQ4Z8M7T3V5X9A2B4C6D8EZ"
    interactions = []
    for turn in range(turns):
        stream_id = str(ULID())
        events = [
            wire_event("atomic.textblock", "PLAN", content="a plan", metadata={"step": turn, "tags": ["web"]}),
            *(
                wire_event("chunked.text", "FINAL_RESPONSE", stream_id=stream_id, is_complete=False, content=f"{n} ")
                for n in range(chunks)
            ),
            wire_event("chunked.text", "FINAL_RESPONSE", stream_id=stream_id, is_complete=True, content=""),
            wire_event("atomic.done", "done"),
        ]
        for event in events:
            event["source"] = source
        request = assist_request(f"question {turn}")
        request["content"]["request_payload"]["parts"][0]["fileIds"] = [str(ULID())]
        interactions.append(interaction(request, events))
    document = body(*interactions)
    document["session"]["processor_id"] = source
    return document


def test_a_chat_of_hundreds_of_turns_passes():
    document = long_chat(turns=300, chunks=6)
    assert len(json.dumps(document, separators=(",", ":"))) < 1 << 20  # under the default body limit
    assert len(Request.model_validate(document).session.interactions) == 300


def test_a_long_streamed_answer_passes():
    document = long_chat(turns=1, chunks=5000)
    assert len(Request.model_validate(document).session.interactions[0].responses) == 5003


def test_what_the_0_3_0_models_accept_at_real_sizes_we_accept():
    reference = pytest.importorskip("sentient_agent_framework.interface.request")
    document = long_chat(turns=300, chunks=6)
    ours = Request.model_validate(document)
    theirs = reference.Request.model_validate(document)
    assert len(theirs.session.interactions) == len(ours.session.interactions) == 300


def test_the_history_the_facade_sends_passes():
    from sentient_assist.protocol.history import Message

    messages = tuple(Message(role="user" if n % 2 == 0 else "assistant", content=f"turn {n}") for n in range(2 * 300))
    interactions = interactions_from(messages, ULID(), "showcase")
    document = body()
    document["session"]["interactions"] = [item.model_dump(mode="json", by_alias=True) for item in interactions]
    assert len(Request.model_validate(document).session.interactions) == 300
