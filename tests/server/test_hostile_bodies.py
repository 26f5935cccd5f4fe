"""A bad body costs little to answer, and nothing a client sends is repeated without a limit.

Against a real uvicorn: a 1 MB body of half a million bad items is one small 422 while
/healthz keeps answering; a 1 MB processor_id (every event's `source`) or object key is
refused without coming back; the 422 names the first 20 errors and counts the rest; a real
chat of hundreds of turns still streams. The time bounds are far above what it takes (tens
of milliseconds), not a benchmark: before the limits, such a body took 4 s to answer and
/healthz waited as long.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator

import httpx
import pytest

from sentient_assist.protocol.request import MAX_NAME_LENGTH
from sentient_assist.server.validation import MAX_ERRORS, TOO_MANY_ERRORS, validation_detail
from tests.protocol.test_request_limits import long_chat
from tests.server.test_stream_guarantees import assert_well_ended
from tests.support.server import RunningServer, running_server
from tests.support.sse import new_body, new_session, read_stream

MAX_BODY = 1_048_576
ENV = {
    "ASSIST_AGENT": "tests.support.agents:ScriptedAgent",
    "ASSIST_MAX_BODY_BYTES": str(MAX_BODY),
    "ASSIST_LOG_LEVEL": "warning",
}
MEGABYTE = 1_000_000
MAX_422_BYTES = 16 * 1024
JSON_HEADERS = {"Content-Type": "application/json"}
GOOD_ID = "01JDQ4Z8M7T3V5X9A2B4C6D8EF"


@pytest.fixture(scope="module")
def server() -> Iterator[RunningServer]:
    with running_server(ENV) as running:
        yield running


@pytest.fixture(scope="module")
def client(server) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=10) as http:
        yield http


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


def post(http: httpx.Client, body: bytes) -> tuple[httpx.Response, float]:
    started = time.monotonic()
    response = http.post("/assist", content=body, headers=JSON_HEADERS)
    return response, time.monotonic() - started


class HealthProbe(threading.Thread):
    """GET /healthz over and over while it runs: how long each answer took, and its status."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.url = url
        self.stopped = threading.Event()
        self.times: list[float] = []
        self.statuses: set[int] = set()

    def run(self) -> None:
        with httpx.Client(timeout=10) as http:
            while not self.stopped.is_set():
                started = time.monotonic()
                self.statuses.add(http.get(self.url + "/healthz").status_code)
                self.times.append(time.monotonic() - started)
                time.sleep(0.01)

    def __enter__(self) -> HealthProbe:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stopped.set()
        self.join(timeout=15)

    @property
    def slowest(self) -> float:
        return max(self.times)


def test_half_a_million_bad_items_are_one_small_422_and_others_are_served_meanwhile(server, client):
    with HealthProbe(server.url) as health:
        for name, body in HOSTILE.items():
            assert len(body) <= MEGABYTE, name
            response, elapsed = post(client, body)
            assert response.status_code == 422, (name, response.text[:500])
            assert len(response.content) < MAX_422_BYTES, (name, len(response.content))
            assert elapsed < 1.0, (name, elapsed)
            detail = response.json()["detail"]
            assert len(detail) <= 2, (name, detail)  # the list stops at its first bad item
            assert all(item["loc"][:3] == ["body", "session", "interactions"] for item in detail), (name, detail)
    assert len(health.times) >= 2 and health.statuses == {200}
    assert health.slowest < 0.5, health.times


def test_a_megabyte_processor_id_is_refused_naming_the_field(client):
    response, _ = post(client, with_session(processor_id="p" * MEGABYTE))
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
def test_a_long_metadata_key_does_not_come_back_whole(client, key_length):
    key = "k" * key_length
    # A value of no metadata type: the event classes report it once per type they tried, under the key.
    body = with_session(interactions=history_with(event={"metadata": {key: None}}))
    response, _ = post(client, body)
    assert response.status_code == 422
    assert len(response.content) < MAX_422_BYTES
    assert "k" * 64 not in response.text
    assert all("k" * 63 + "…" in item["loc"] for item in response.json()["detail"])


def test_the_first_20_errors_are_named_and_the_rest_counted(client):
    # 16 keys whose value is of no metadata type: 5 errors each (str, int, float, bool, list[str]).
    metadata = {f"key{n:02}": None for n in range(16)}
    response, _ = post(client, with_session(interactions=history_with(event={"metadata": metadata})))
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
