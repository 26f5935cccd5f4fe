"""The body of POST /assist: query, optional session, history, and how bad ids are reported."""

from __future__ import annotations

import copy
import re

import pytest
from pydantic import ValidationError
from ulid import ULID

from sentient_assist.events import DocumentEvent, DoneEvent, ErrorContent, ErrorEvent, TextBlockEvent, TextChunkEvent
from sentient_assist.protocol import Request
from sentient_assist.protocol.request import AssistRequest
from sentient_assist.protocol.ulid import ULID_PATTERN

# Increasing ids, so that parent/root ordering rules hold where a test needs them.
ROOT_ID, PARENT_ID, REQUEST_ID, CHAT_ID, QUERY_ID, ACTIVITY_ID, SESSION_REQUEST_ID = (
    "01JDQ4Z8M7T3V5X9A2B4C6D8E" + suffix for suffix in "0123456"
)
EVENT_ID = "01JDQ4Z8M7T3V5X9A2B4C6D8EF"


# --- building bodies -------------------------------------------------------------------


def assist_request(*prompts: str, **fields) -> dict:
    parts = [{"prompt": prompt, "fileIds": []} for prompt in prompts or ("hello",)]
    return {
        "id": REQUEST_ID,
        "chatId": CHAT_ID,
        "content": {"capability": "assist", "request_payload": {"parts": parts}},
        **fields,
    }


def wire_event(content_type: str, event_name: str, **own) -> dict:
    return {
        "content_type": content_type,
        "event_name": event_name,
        "schema_version": "1.0",
        "id": EVENT_ID,
        "source": "agent-x",
        "metadata": None,
        **own,
    }


WIRE_EVENTS = [
    (DocumentEvent, wire_event("atomic.json", "SOURCES", content={"results": [{"title": "t"}]})),
    (TextBlockEvent, wire_event("atomic.textblock", "PLAN", content="the plan")),
    (TextChunkEvent, wire_event("chunked.text", "FINAL_RESPONSE", stream_id="s1", is_complete=False, content="Hi")),
    (ErrorEvent, wire_event("atomic.error", "error", content={"error_message": "oops"})),
    (DoneEvent, wire_event("atomic.done", "done")),
]


def interaction(request: dict | None = None, responses: list[dict] | None = None) -> dict:
    return {
        "request": {"sender": "user", "recipients": ["agent-x"], "event": request or assist_request()},
        "responses": [{"event": event} for event in responses or []],
    }


def body(*interactions: dict, session: bool = True) -> dict:
    result = {"query": {"id": QUERY_ID, "prompt": "What can you do?"}}
    if session:
        result["session"] = {
            "processor_id": "agent-x",
            "activity_id": ACTIVITY_ID,
            "request_id": SESSION_REQUEST_ID,
            "interactions": list(interactions),
        }
    return result


def with_value(document: dict, path: tuple, value) -> dict:
    """A deep copy of `document` with the value at `path` replaced."""
    result = copy.deepcopy(document)
    target = result
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return result


def error_locations(exc: pytest.ExceptionInfo[ValidationError]) -> list[tuple]:
    return [error["loc"] for error in exc.value.errors()]


def parse_request(event: dict) -> AssistRequest:
    return Request.model_validate(body(interaction(event))).session.interactions[0].request.event


def parsed_responses(events: list[dict]) -> list:
    responses = Request.model_validate(body(interaction(responses=events))).session.interactions[0].responses
    return [message.event for message in responses]


# --- session ---------------------------------------------------------------------------


def test_session_may_be_missing():
    request = Request.model_validate(body(session=False))
    assert request.session is None
    assert request.query.id == ULID.from_str(QUERY_ID)
    assert request.query.prompt == "What can you do?"


def test_session_may_be_null():
    assert Request.model_validate({**body(session=False), "session": None}).session is None


def test_session_fields_are_parsed():
    session = Request.model_validate(body(interaction())).session
    assert session.processor_id == "agent-x"
    assert session.activity_id == ULID.from_str(ACTIVITY_ID)
    assert session.request_id == ULID.from_str(SESSION_REQUEST_ID)
    assert len(session.interactions) == 1


def test_interactions_default_to_empty():
    document = body()
    del document["session"]["interactions"]
    assert Request.model_validate(document).session.interactions == []


def test_request_message_sender_and_recipients_are_optional():
    document = body(interaction())
    document["session"]["interactions"][0]["request"] = {"event": assist_request()}
    message = Request.model_validate(document).session.interactions[0].request
    assert message.sender is None
    assert message.recipients is None


def test_request_message_recipients_are_read():
    message = Request.model_validate(body(interaction())).session.interactions[0].request
    assert message.sender == "user"
    assert message.recipients == {"agent-x"}


# --- aliases ---------------------------------------------------------------------------


@pytest.mark.parametrize("key", ["chatId", "chat_id"])
def test_chat_id_under_either_name(key):
    event = assist_request()
    event[key] = event.pop("chatId")
    assert parse_request(event).chat_id == ULID.from_str(CHAT_ID)


@pytest.mark.parametrize("key", ["fileIds", "files_ids"])
def test_file_ids_under_either_name(key):
    event = assist_request()
    event["content"]["request_payload"]["parts"] = [{"prompt": "see file", key: ["file-1", "file-2"]}]
    assert parse_request(event).content.request_payload.parts[0].files_ids == ["file-1", "file-2"]


def test_file_ids_default_to_empty():
    event = assist_request()
    event["content"]["request_payload"]["parts"] = [{"prompt": "no files"}]
    assert parse_request(event).content.request_payload.parts[0].files_ids == []


# --- ULID fields -------------------------------------------------------------------------

EVENT_PATH = ("session", "interactions", 0, "request", "event")
ULID_FIELDS = {
    "query.id": ("query", "id"),
    "session.activity_id": ("session", "activity_id"),
    "session.request_id": ("session", "request_id"),
    "request.id": (*EVENT_PATH, "id"),
    "request.chatId": (*EVENT_PATH, "chatId"),
    "request.root_request_id": (*EVENT_PATH, "root_request_id"),
}
BAD_ULIDS = {
    "25-chars": QUERY_ID[:25],
    "27-chars": QUERY_ID + "0",
    "letter-U": "01JDQ4Z8M7T3V5X9A2B4C6D8EU",
    "letter-I": "01JDQ4Z8M7T3V5X9A2B4C6D8EI",
    "letter-L": "01JDQ4Z8M7T3V5X9A2B4C6D8EL",
    "letter-O": "01JDQ4Z8M7T3V5X9A2B4C6D8EO",
    "past-2^128": "81JDQ4Z8M7T3V5X9A2B4C6D8EF",
    "integer": 12345678901234567890,
    "empty": "",
}


@pytest.mark.parametrize("value", BAD_ULIDS.values(), ids=BAD_ULIDS.keys())
@pytest.mark.parametrize("path", ULID_FIELDS.values(), ids=ULID_FIELDS.keys())
def test_malformed_ulid_is_an_error_naming_the_field(path, value):
    with pytest.raises(ValidationError) as exc:
        Request.model_validate(with_value(body(interaction()), path, value))
    assert error_locations(exc) == [path]


@pytest.mark.parametrize(
    "path",
    [p for name, p in ULID_FIELDS.items() if name != "request.root_request_id"],
    ids=[name for name in ULID_FIELDS if name != "request.root_request_id"],
)
def test_null_in_a_required_ulid_field_is_an_error_naming_the_field(path):
    with pytest.raises(ValidationError) as exc:
        Request.model_validate(with_value(body(interaction()), path, None))
    assert error_locations(exc) == [path]


@pytest.mark.parametrize("value", BAD_ULIDS.values(), ids=BAD_ULIDS.keys())
def test_malformed_event_id_in_history_is_an_error_naming_the_field(value):
    with pytest.raises(ValidationError) as exc:
        parsed_responses([wire_event("atomic.done", "done", id=value)])
    # The union's tag (the content_type) is part of the location.
    assert error_locations(exc) == [("session", "interactions", 0, "responses", 0, "event", "atomic.done", "id")]


@pytest.mark.parametrize("path", ULID_FIELDS.values(), ids=ULID_FIELDS.keys())
def test_well_formed_ulid_passes_in_every_field(path):
    # The control for the error tests above: the same body with a good value parses.
    Request.model_validate(with_value(body(interaction()), path, ROOT_ID))


def test_lowercase_ulids_are_accepted_and_read_as_the_same_id():
    document = with_value(body(), ("query", "id"), QUERY_ID.lower())
    document = with_value(document, ("session", "activity_id"), ACTIVITY_ID.lower())
    request = Request.model_validate(document)
    assert request.query.id == ULID.from_str(QUERY_ID)
    assert str(request.session.activity_id) == ACTIVITY_ID


@pytest.mark.parametrize("value", [None, "absent"])
def test_an_event_in_history_without_an_id_gets_a_fresh_one_as_in_0_3_0(value):
    event = wire_event("atomic.done", "done", id=value)
    if value == "absent":
        del event["id"]
    [done] = parsed_responses([event])
    assert ULID.from_str(done.id)


def test_lowercase_event_id_is_kept_as_uppercase_string():
    [done] = parsed_responses([wire_event("atomic.done", "done", id=EVENT_ID.lower())])
    assert done.id == EVENT_ID


# --- history -----------------------------------------------------------------------------


def test_responses_parse_into_their_event_classes():
    events = parsed_responses([event for _, event in WIRE_EVENTS])
    assert [type(event) for event in events] == [cls for cls, _ in WIRE_EVENTS]
    assert all(event.id == EVENT_ID and event.source == "agent-x" for event in events)


def test_parsed_responses_keep_their_content():
    document, text_block, chunk, error, done = parsed_responses([event for _, event in WIRE_EVENTS])
    assert document.content == {"results": [{"title": "t"}]}
    assert text_block.event_name == "PLAN" and text_block.content == "the plan"
    assert (chunk.stream_id, chunk.is_complete, chunk.content) == ("s1", False, "Hi")
    assert error.content == ErrorContent(error_message="oops", error_code=500, details=None)
    assert done.event_name == "done"


def test_response_with_unknown_content_type_fails():
    with pytest.raises(ValidationError):
        parsed_responses([wire_event("atomic.video", "CLIP", content="x")])


@pytest.mark.parametrize(
    ("prompts", "expected"),
    [(("one",), "one"), (("one", "two", "three"), "one\ntwo\nthree"), (("", "x"), "\nx")],
)
def test_prompt_joins_part_prompts_with_newlines(prompts, expected):
    assert parse_request(assist_request(*prompts)).prompt == expected


def test_root_request_id_defaults_to_the_request_id():
    assert parse_request(assist_request()).root_request_id == ULID.from_str(REQUEST_ID)


def test_parent_and_root_request_ids_are_read():
    request = parse_request(assist_request(parent_request_id=PARENT_ID, root_request_id=ROOT_ID))
    assert request.parent_request_id == ULID.from_str(PARENT_ID)
    assert request.root_request_id == ULID.from_str(ROOT_ID)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"parent_request_id": PARENT_ID}, "root_request_id is required"),
        ({"parent_request_id": CHAT_ID, "root_request_id": ROOT_ID}, "parent_request_id must be less than id"),
        ({"parent_request_id": PARENT_ID, "root_request_id": CHAT_ID}, "root_request_id must not be greater"),
    ],
    ids=["parent-without-root", "parent-after-request", "root-after-parent"],
)
def test_inconsistent_request_ids_fail(fields, message):
    with pytest.raises(ValidationError, match=message) as exc:
        parse_request(assist_request(**fields))
    assert error_locations(exc) == [EVENT_PATH]


# --- JSON schema -------------------------------------------------------------------------


def ulid_schemas(schema: dict) -> dict:
    """Each schema property (`Model.field`) that is a ULID, directly or as a nullable anyOf."""
    found = {}
    for model, definition in schema["$defs"].items():
        for field, prop in definition.get("properties", {}).items():
            for candidate in prop.get("anyOf", [prop]):
                if "pattern" in candidate:
                    found[f"{model}.{field}"] = candidate
    return found


def test_json_schema_marks_ulid_fields_as_patterned_strings():
    schemas = ulid_schemas(Request.model_json_schema())
    expected = {
        "Query.id",
        "SessionObject.activity_id",
        "SessionObject.request_id",
        "AssistRequest.id",
        "AssistRequest.chatId",
        "AssistRequest.parent_request_id",
        "AssistRequest.root_request_id",
    }
    assert expected <= set(schemas)
    for name in expected:
        assert schemas[name]["type"] == "string", name
        assert schemas[name]["pattern"] == ULID_PATTERN, name


def test_json_schema_ulid_pattern_agrees_with_the_validator():
    pattern = re.compile(ulid_schemas(Request.model_json_schema())["Query.id"]["pattern"])
    for good in (QUERY_ID, QUERY_ID.lower(), str(ULID())):
        assert pattern.match(good), good
    for bad in BAD_ULIDS.values():
        assert not (isinstance(bad, str) and pattern.match(bad)), bad


def test_a_ulid_with_a_trailing_newline_is_refused():
    from sentient_assist.protocol.ulid import is_ulid

    assert is_ulid(QUERY_ID) and not is_ulid(QUERY_ID + "\n")
