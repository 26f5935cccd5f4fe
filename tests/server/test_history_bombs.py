"""History bombs (issue 23, items 3 and 4), against a real uvicorn: a 1 MB body of 8,500 past
turns is a valid request (long chats are real), and it must cost the service little.

- An open stream holds its history compact: 10 streams whose agent waits, each with a 1 MB
  history, grow the server's RSS by under 4 MB each (before: 29 MB each).
- What the open streams' histories hold together is bounded: past
  ASSIST_MAX_HISTORY_BYTES_TOTAL a request with a history gets a 503 naming the setting (a
  history larger than the whole budget, a 413), and the budget is free again once a stream
  ends; the OpenAI face counts in the same budget.
What one 1 MB history costs the server in CPU time (about 40 ms; 230 before), and the latency
others see meanwhile, are for bench/history.py to measure (its `cpu` and `bombs` loads), not a
test.

Every attack is bounded: at most 11 held streams, sockets with timeouts.
"""

from __future__ import annotations

import json
import random

import httpx
import pytest
from ulid import ULID

from sentient_assist.server.admission import json_of
from tests.support.held_stream import HeldStream, rss_mb_per_held_stream
from tests.support.server import RunningServer, Servers
from tests.support.sse import events_of
from tests.support.waiting import wait_until

MAX_BODY = 1_048_576
CHAT_ID = "01JDQ4Z8M7T3V5X9A2B4C6D8EF"
TURNS = 8_500
ENV = {"ASSIST_AGENT": "tests.support.agents:ScriptedAgent", "ASSIST_LOG_LEVEL": "warning"}
HEADERS = {"Content-Type": "application/json"}
SETTING = "ASSIST_MAX_HISTORY_BYTES_TOTAL"


def dumps(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def bomb(prompt: str, turns: int = TURNS, size: int = MAX_BODY - 1024) -> bytes:
    """A request whose history is `turns` short past turns, the prompts padded to `size` bytes."""
    document = {
        "query": {"id": str(ULID()), "prompt": prompt},
        "session": {
            "processor_id": "scripted",
            "activity_id": str(ULID()),
            "request_id": str(ULID()),
            "interactions": [],
        },
    }
    turn = {"request": {"event": {"chatId": CHAT_ID, "content": {"request_payload": {"parts": [{"prompt": ""}]}}}}}
    pad = (size - len(dumps(document))) // turns - len(dumps(turn)) - 1
    assert pad >= 0, "the turns do not fit"
    document["session"]["interactions"] = [
        {"request": {"event": {**turn["request"]["event"], "content": {"request_payload": {"parts": [
            {"prompt": f"{index:x}".ljust(pad, ".")}
        ]}}}}}
        for index in range(turns)
    ]  # fmt: skip
    body = dumps(document)
    assert len(body) <= size
    return body


def plain(prompt: str) -> bytes:
    return dumps({"query": {"id": str(ULID()), "prompt": prompt}})


def session_of(response: httpx.Response) -> dict:
    """What the scripted agent's `session` behaviour saw, from its SESSION event."""
    (session,) = [event.json["content"] for event in events_of(response.text) if event.event == "SESSION"]
    return session


@pytest.fixture(scope="module")
def server(serve: Servers) -> RunningServer:
    return serve({**ENV, "ASSIST_REQUEST_TIMEOUT": "60"})


def warm_up(server: RunningServer, requests: int = 2) -> None:
    """The first bombs' one-time costs (imports, the allocator's arenas) out of the way."""
    with httpx.Client(base_url=server.url, timeout=20) as client:
        for _ in range(requests):
            response = client.post("/assist", content=bomb("fast:1"), headers=HEADERS)
            assert response.status_code == 200 and "event: done" in response.text


def test_the_bomb_is_a_valid_request_of_8500_turns(server):
    body = bomb("session")
    assert len(json.loads(body)["session"]["interactions"]) == TURNS and MAX_BODY - 4096 < len(body) <= MAX_BODY
    with httpx.Client(base_url=server.url, timeout=20) as client:
        response = client.post("/assist", content=body, headers=HEADERS)
    assert response.status_code == 200
    session = session_of(response)
    assert session["interactions"] == TURNS
    assert session["prompts"][-1].startswith(f"{TURNS - 1:x}.")


def test_a_last_turn_of_18000_answers_is_answered(server):
    # The run reads the last turn's pause off its record before the agent starts (no model
    # of it built: runtime/pauses.py); the agent here reads the turn's prompt.
    done = {"event": {"content_type": "atomic.done", "source": "s"}}
    document = json.loads(plain("session"))
    turn = {"chatId": CHAT_ID, "content": {"request_payload": {"parts": [{"prompt": "long"}]}}}
    document["session"] = {
        "processor_id": "scripted",
        "activity_id": str(ULID()),
        "request_id": str(ULID()),
        "interactions": [{"request": {"event": turn}, "responses": [done] * 18_000}],
    }
    body = dumps(document)
    assert len(body) <= MAX_BODY
    with httpx.Client(base_url=server.url, timeout=20) as client:
        response = client.post("/assist", content=body, headers=HEADERS)
    assert response.status_code == 200
    session = session_of(response)
    assert session["interactions"] == 1 and session["prompts"] == ["long"]


def test_ten_open_streams_with_a_1_mb_history_each_hold_under_4_mb_each(server):
    warm_up(server)
    assert wait_until(lambda: server.metric("assist_streams_open") == 0, 10)  # every earlier stream let go
    per_stream = rss_mb_per_held_stream(server, [bomb("silent:30") for _ in range(10)])
    assert per_stream < 4, f"{per_stream:.1f} MB per open stream"


@pytest.fixture(scope="module")
def budget_server(serve: Servers) -> RunningServer:
    # Room for one 1 MB history, not two; bodies up to 4 MB.
    return serve(
        {**ENV, SETTING: str(1_500_000), "ASSIST_MAX_BODY_BYTES": str(4 * MAX_BODY), "ASSIST_REQUEST_TIMEOUT": "60"}
    )


def test_past_the_budget_a_history_gets_a_503_naming_the_setting(budget_server):
    held = HeldStream(budget_server, bomb("silent:30"))
    try:
        assert held.status == 200
        held.first_event()
        refused = HeldStream(budget_server, bomb("silent:30"))
        assert refused.status == 503
        assert b"retry-after: 1" in refused.received.lower()
        assert SETTING in json.loads(refused.answer())["detail"]
        refused.close()
        with httpx.Client(base_url=budget_server.url, timeout=20) as client:
            # What holds no history is not refused; the OpenAI face counts in the same budget.
            assert client.post("/assist", content=plain("fast:1"), headers=HEADERS).status_code == 200
            messages = [{"role": "user" if i % 2 == 0 else "assistant", "content": "x" * 40} for i in range(20_001)]
            chat = client.post("/v1/chat/completions", json={"model": "scripted", "messages": messages})
            assert chat.status_code == 503 and SETTING in chat.json()["error"]["message"]
    finally:
        held.close()
    # Once the stream has ended (the service saw its client go), its history is freed and the budget with it.
    assert wait_until(lambda: budget_server.metric("assist_streams_open") == 0, 10)
    with httpx.Client(base_url=budget_server.url, timeout=20) as client:
        assert client.post("/assist", content=bomb("fast:1"), headers=HEADERS).status_code == 200


def test_a_history_larger_than_the_whole_budget_gets_a_413_naming_the_setting(budget_server):
    with httpx.Client(base_url=budget_server.url, timeout=20) as client:
        response = client.post("/assist", content=bomb("fast:1", turns=17_000 // 2, size=2 * MAX_BODY), headers=HEADERS)
    assert response.status_code == 413
    assert SETTING in response.json()["detail"]


def test_the_route_reads_a_json_body_as_json_loads_does():
    # orjson first, json.loads where orjson would read otherwise or refuses: the same objects.
    samples = [
        b'{"a":1,"b":2,"a":3}',
        b'{"a":12345678901234567890}',
        b'{"a":-9223372036854775809}',
        b"[18446744073709551615, -0, -0.0, 1E2, 1e-400, 1.7976931348623157e308]",
        b'{"a":1e400}',
        b"[NaN, Infinity, -Infinity]",
        b'{"a":"\\ud800"}',
        b'["\\ud83d\\ude00", "\\u0000", "\xc3\xa9"]',
        b"\xef\xbb\xbf{}",
        '{"a": 1}'.encode("utf-16"),
        b' {"a" : [ ] } \n',
        bomb("x"),
    ]
    rng = random.Random(23)
    base = samples[3] + b"x" + samples[7]
    for _ in range(20_000):  # and near misses: a byte dropped, added or changed
        sample = bytearray(base)
        position = rng.randrange(len(sample))
        choice = rng.random()
        if choice < 0.3:
            del sample[position]
        else:
            sample.insert(position, rng.choice(b'0123456789.eE+-"\\u[]{},: \x00\xff'))
        samples.append(bytes(sample))
    for sample in samples:
        try:
            expected: object = json.loads(sample)
        except (ValueError, RecursionError) as exc:
            expected = type(exc)
        try:
            got: object = json_of(sample)
        except (ValueError, RecursionError) as exc:
            got = type(exc)
        assert repr(got) == repr(expected), sample[:200]
