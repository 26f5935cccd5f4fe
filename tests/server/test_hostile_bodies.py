"""A bad body costs little to answer, and nothing a client sends is repeated without a limit.

Against a real uvicorn: a 1 MB body of half a million bad items is one small 422 while
/healthz keeps answering; a 1 MB processor_id (every event's `source`) or object key is
refused without coming back; the 422 names the first 20 errors and counts the rest; a real
chat of hundreds of turns still streams. How fast the 422 comes, and /healthz meanwhile, is
bench/reactions.py's to measure (tens of milliseconds; before the limits, such a body took
4 s to answer and /healthz waited as long).
"""

from __future__ import annotations

import json
import threading
import time

import httpx
import pytest

from sentient_assist.protocol.request import MAX_NAME_LENGTH
from sentient_assist.server.validation import MAX_ERRORS, TOO_MANY_ERRORS, validation_detail
from tests.protocol.test_request_limits import long_chat
from tests.server.test_stream_guarantees import assert_well_ended
from tests.support.request import post
from tests.support.server import RunningServer, Servers
from tests.support.sse import new_body, new_session, read_stream

MAX_BODY = 1_048_576
ENV = {
    "ASSIST_AGENT": "tests.support.agents:ScriptedAgent",
    "ASSIST_MAX_BODY_BYTES": str(MAX_BODY),
    "ASSIST_LOG_LEVEL": "warning",
}
MEGABYTE = 1_000_000
MAX_422_BYTES = 16 * 1024
GOOD_ID = "01JDQ4Z8M7T3V5X9A2B4C6D8EF"


@pytest.fixture(scope="module")
def server(serve: Servers) -> RunningServer:
    return serve(ENV)


def with_session(**session) -> bytes:
    """A body whose session has these fields over a valid one, as compact JSON."""
    return json.dumps(new_body("session", {**new_session(), **session}), separators=(",", ":")).encode()


def history_with(request: dict | None = None, event: dict | None = None) -> list[dict]:
    """One past turn: a valid request and answer, with these fields over them."""
    past_request = {"chatId": GOOD_ID, "content": {"request_payload": {"parts": [{"prompt": "hi"}]}}}
    past_event = {"content_type": "atomic.done", "event_name": "done", "source": "agent"}
    return [
        {
            "request": {"event": past_request, **(request or {})},
            "responses": [{"event": {**past_event, **(event or {})}}],
        }
    ]


def filled(template: bytes, item: bytes) -> bytes:
    """`template` with its `[]` marker filled with as many `item`s as make a 1 MB body."""
    head, tail = template.split(b'"@@"', 1)
    count = (MEGABYTE - len(head) - len(tail)) // (len(item) + 1)
    return head + b",".join([item] * count) + tail


# Half a million bad items (or ~85,000 bad metadata entries) in every list the body has.
HOSTILE = {
    "interactions": filled(with_session(interactions=["@@"]), b"1"),
    "responses": filled(with_session(interactions=[{**history_with()[0], "responses": ["@@"]}]), b"1"),
    "recipients": filled(with_session(interactions=history_with(request={"recipients": ["@@"]})), b"1"),
    "fileIds": filled(
        with_session(
            interactions=history_with(
                request={
                    "event": {
                        "chatId": GOOD_ID,
                        "content": {"request_payload": {"parts": [{"prompt": "x", "fileIds": ["@@"]}]}},
                    }
                }
            )
        ),
        b"1",
    ),
    "metadata list": filled(with_session(interactions=history_with(event={"metadata": {"k": ["@@"]}})), b"1"),
    "many turns of bad answers": filled(
        with_session(interactions=["@@"]), b'{"responses":[' + b",".join([b"1"] * 2000) + b"]}"
    ),
}


class HealthProbe(threading.Thread):
    """GET /healthz over and over while it runs: each answer's status."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.url = url
        self.stopped = threading.Event()
        self.answers = 0
        self.statuses: set[int] = set()

    def run(self) -> None:
        with httpx.Client(timeout=10) as http:
            while not self.stopped.is_set():
                self.statuses.add(http.get(self.url + "/healthz").status_code)
                self.answers += 1
                time.sleep(0.01)  # the probe's pace: a request every 10 ms, not a flood of its own

    def __enter__(self) -> HealthProbe:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stopped.set()
        self.join(timeout=15)


def test_half_a_million_bad_items_are_one_small_422_and_others_are_served_meanwhile(server):
    with HealthProbe(server.url) as health:
        for name, body in HOSTILE.items():
            assert len(body) <= MEGABYTE, name
            response = post(server, "/assist", body, timeout=10)
            assert response.status_code == 422, (name, response.text[:500])
            assert len(response.content) < MAX_422_BYTES, (name, len(response.content))
            detail = response.json()["detail"]
            assert len(detail) <= 2, (name, detail)  # the list stops at its first bad item
            assert all(item["loc"][:3] == ["body", "session", "interactions"] for item in detail), (name, detail)
    assert health.answers >= 2 and health.statuses == {200}


def test_a_megabyte_processor_id_is_refused_naming_the_field(server):
    response = post(server, "/assist", with_session(processor_id="p" * MEGABYTE), timeout=10)
    assert response.status_code == 422
    assert response.json()["detail"] == [
        {
            "loc": ["body", "session", "processor_id"],
            "msg": f"String should have at most {MAX_NAME_LENGTH} characters",
            "type": "string_too_long",
        }
    ]
    assert len(response.content) < 1024


def test_a_processor_id_at_the_limit_is_every_events_source(server):
    processor_id = "p" * MAX_NAME_LENGTH
    stream = read_stream(server.url, new_body("session", new_session(processor_id)), timeout=10)
    assert_well_ended(stream)
    assert {event["source"] for event in stream.events} == {processor_id}


@pytest.mark.parametrize("key_length", [MAX_NAME_LENGTH, MEGABYTE])
def test_a_long_metadata_key_does_not_come_back_whole(server, key_length):
    key = "k" * key_length
    # A value of no metadata type: the event classes report it once per type they tried, under the key.
    body = with_session(interactions=history_with(event={"metadata": {key: None}}))
    response = post(server, "/assist", body, timeout=10)
    assert response.status_code == 422
    assert len(response.content) < MAX_422_BYTES
    assert "k" * 64 not in response.text
    assert all("k" * 63 + "…" in item["loc"] for item in response.json()["detail"])


def test_the_first_20_errors_are_named_and_the_rest_counted(server):
    # 16 keys whose value is of no metadata type: 5 errors each (str, int, float, bool, list[str]).
    metadata = {f"key{n:02}": None for n in range(16)}
    response = post(
        server, "/assist", with_session(interactions=history_with(event={"metadata": metadata})), timeout=10
    )
    assert response.status_code == 422
    detail = response.json()["detail"]
    assert len(detail) == MAX_ERRORS + 1
    event = ["body", "session", "interactions", 0, "responses", 0, "event", "atomic.done", "metadata"]
    expected = [[*event, f"key{n:02}", kind] for n in range(4) for kind in ("str", "int", "float", "bool", "list[str]")]
    assert [item["loc"] for item in detail[:MAX_ERRORS]] == expected
    assert detail[-1] == {"loc": ["body"], "msg": "... and 60 more errors", "type": TOO_MANY_ERRORS}


def test_a_chat_of_hundreds_of_turns_still_streams(server):
    body = long_chat(turns=300, chunks=6)
    body["query"]["prompt"] = "session"
    assert len(json.dumps(body, separators=(",", ":"))) <= MAX_BODY
    stream = read_stream(server.url, body, timeout=10)
    assert_well_ended(stream)
    assert stream.names() == ["SESSION", "done"]
    assert stream.events[0]["content"]["interactions"] == 300


# --- the 422 itself, whatever the errors ------------------------------------------------------


def error(loc: tuple, **fields) -> dict:
    return {"type": "string_type", "loc": loc, "msg": "Input should be a valid string", **fields}


def test_the_detail_never_holds_what_was_sent():
    sent = "SENT-" + "x" * 1000
    errors = [
        error(("body", "a"), input=sent, ctx={"error": sent}),
        {
            "type": "union_tag_invalid",
            "loc": ("body", "event"),
            "msg": f"Input tag '{sent}' found using 'content_type' does not match any of the expected tags: 'a', 'b'",
            "input": {"content_type": sent},
            "ctx": {"discriminator": "'content_type'", "tag": sent, "expected_tags": "'a', 'b'"},
        },
    ]
    detail = validation_detail(errors)
    assert "SENT-" not in json.dumps(detail)
    assert detail[1]["msg"] == "Input 'content_type' does not match any of the expected tags: 'a', 'b'"
    assert all(set(item) == {"loc", "msg", "type"} for item in detail)


def test_the_detail_stays_under_16_kib_whatever_the_errors():
    huge = "\x01" * MEGABYTE  # escaped in JSON: six bytes a character
    errors = [error(("body", *[huge] * 12, n), msg=huge) for n in range(1000)]
    detail = validation_detail(errors)
    assert len(json.dumps(detail)) < MAX_422_BYTES
    assert detail[-1]["type"] == TOO_MANY_ERRORS
    shown = len(detail) - 1
    assert 0 < shown <= MAX_ERRORS
    assert detail[-1]["msg"] == f"... and {1000 - shown} more errors"
    assert all(len(part) <= 64 for item in detail[:-1] for part in item["loc"] if isinstance(part, str))


def test_twenty_errors_or_fewer_are_all_shown_and_nothing_is_added():
    errors = [error(("body", "field", n)) for n in range(MAX_ERRORS)]
    detail = validation_detail(errors)
    assert [item["loc"] for item in detail] == [["body", "field", n] for n in range(MAX_ERRORS)]
    assert validation_detail([*errors, error(("body", "last"))])[-1]["msg"] == "... and 1 more error"
