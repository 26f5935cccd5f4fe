"""What docs/protocol.md promises whatever the agent does, against a real uvicorn on loopback."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from ulid import ULID

from tests.support.agents import SECRET
from tests.support.files import wait_for_file
from tests.support.request import posting
from tests.support.sse import Stream, iter_events, new_body, new_session, read_stream
from tests.support.waiting import wait_until

reference = pytest.importorskip("sentient_agent_framework.interface.events")


def assert_well_ended(stream: Stream) -> None:
    """200, ids strictly increasing, exactly one done and it is last, every event valid for 0.3.0."""
    assert stream.status == 200
    assert stream.headers["content-type"].startswith("text/event-stream")
    names = stream.names()
    assert names.count("done") == 1 and names[-1] == "done", names
    ids = [event["id"] for event in stream.events]
    assert all(a < b for a, b in itertools.pairwise(ids)), "event ids must strictly increase"
    for frame in stream.frames:
        reference.ResponseEventAdapter.validate_json(frame.data)
    assert b"\nid:" not in stream.raw and not stream.raw.startswith(b"id:")


def assert_streams_completed(stream: Stream) -> None:
    """Each text stream ends with exactly one is_complete chunk, and nothing of it follows."""
    finished: set[str] = set()
    for event in stream.events:
        if event["content_type"] != "chunked.text":
            continue
        assert event["stream_id"] not in finished, f"chunk after the end of {event['stream_id']}"
        if event["is_complete"]:
            finished.add(event["stream_id"])
    started = {e["stream_id"] for e in stream.events if e["content_type"] == "chunked.text"}
    assert started == finished


def test_every_event_type_reaches_the_client_as_the_reference_models_expect(scripted_server):
    session = new_session("processor-7")
    stream = read_stream(scripted_server.url, new_body("every-event", session))
    assert_well_ended(stream)
    assert_streams_completed(stream)
    assert stream.names() == ["PLAN", "SOURCES", "error", "FINAL_RESPONSE", "FINAL_RESPONSE", "FINAL_RESPONSE", "done"]
    assert {event["source"] for event in stream.events} == {"processor-7"}
    plan, sources, error = stream.events[:3]
    assert plan["content"] == "a plan ✓ ünïcödé\u2028line"
    assert b"\\u2028" in stream.raw and "\u2028".encode() not in stream.raw
    assert sources["content"] == {"results": [{"n": 1, "ok": True, "x": None, "f": 1.5}]}
    assert error["content"] == {"error_message": "shown to the user", "error_code": 429, "details": {"retry": 3}}
    assert "".join(e["content"] for e in stream.events if e["event_name"] == "FINAL_RESPONSE") == "streamed answer"


def test_the_official_client_decoder_reads_a_stream_with_pings(scripted_server):
    simple_sse_client = pytest.importorskip("simple_sse_client")
    import asyncio

    async def read_all() -> list:
        events = []
        async for sse in simple_sse_client.async_stream(
            url=scripted_server.url + "/assist", method="POST", json=new_body("silent:1.6"), timeout=30.0
        ):
            events.append(reference.ResponseEventAdapter.validate_python(sse.json()))
        return events

    events = asyncio.run(read_all())
    assert [event.event_name for event in events] == ["STATUS", "FINAL", "done"]
    raw = read_stream(scripted_server.url, new_body("silent:1.6"))
    assert len(raw.comments) >= 2, "a silent agent is kept alive by comment pings"
    assert_well_ended(raw)


def test_an_agent_that_raises_gets_error_then_done_and_no_internals(scripted_server):
    stream = read_stream(scripted_server.url, new_body("raise"), headers={"X-Request-ID": "req-raise-1"})
    assert_well_ended(stream)
    assert_streams_completed(stream)
    error = next(event for event in stream.events if event["event_name"] == "error")
    assert error["content"]["error_code"] == 500
    assert error["content"]["details"] == {"error_type": "RuntimeError", "request_id": "req-raise-1"}
    assert stream.headers["x-request-id"] == "req-raise-1"
    assert stream.names()[-2:] == ["error", "done"] or stream.names()[-3:-1] == ["error", "FINAL_RESPONSE"]
    assert SECRET.encode() not in stream.raw and b"Traceback" not in stream.raw


def test_an_agent_that_raises_cancelled_error_itself_still_ends_with_error_and_done(scripted_server):
    stream = read_stream(scripted_server.url, new_body("cancel-itself"), timeout=10)
    assert_well_ended(stream)
    assert stream.names() == ["STATUS", "error", "done"]
    assert stream.events[1]["content"]["details"]["error_type"] == "CancelledError"


def test_an_agent_that_returns_without_complete_gets_its_streams_closed_and_done(scripted_server):
    stream = read_stream(scripted_server.url, new_body("no-complete"))
    assert_well_ended(stream)
    assert_streams_completed(stream)
    assert [e["event_name"] for e in stream.events if e.get("is_complete")] == ["FINAL_RESPONSE", "THINKING"]
    assert "error" not in stream.names()


def test_a_request_without_session_streams_with_a_fresh_session(scripted_server):
    for body in (new_body("session"), {**new_body("session"), "session": None}):
        stream = read_stream(scripted_server.url, body)
        assert_well_ended(stream)
        session = stream.events[0]["content"]
        assert session["processor_id"] == "scripted" and session["interactions"] == 0
        assert ULID.from_str(session["activity_id"]) and ULID.from_str(session["request_id"])
        assert stream.events[0]["source"] == "scripted"


def test_the_agent_sees_the_history_the_session_carries(scripted_server):
    def past(prompt: str) -> dict:
        request = {
            "id": str(ULID()),
            "chatId": str(ULID()),
            "content": {"capability": "assist", "request_payload": {"parts": [{"prompt": prompt, "fileIds": []}]}},
        }
        return {"request": {"event": request}, "responses": []}

    session = new_session(interactions=[past("first turn"), past("second turn")])
    stream = read_stream(scripted_server.url, new_body("session", session))
    assert stream.events[0]["content"]["prompts"] == ["first turn", "second turn"]


def assert_a_disconnect_cancels_the_agent(url: str, marker: Path) -> None:
    """Start a `hang` run (an agent that never ends by itself), leave after its first event: the
    agent must be cancelled. How soon is bench/reactions.py's to measure."""
    with posting(url, "/assist", new_body(f"hang:{marker}"), timeout=10) as response:
        next(iter_events(response))
    assert wait_for_file(marker, timeout=3) is not None, "the agent task was not cancelled after the client left"


def test_a_client_that_disconnects_gets_its_agent_cancelled(scripted_server, tmp_path):
    assert_a_disconnect_cancels_the_agent(scripted_server.url, tmp_path / "cancelled")


def test_an_agent_failing_after_its_client_left_is_logged_with_the_request_id(scripted_server, tmp_path):
    # The run was ended on purpose, so nothing more is sent; the agent's failure on its way
    # out is still read and logged (not left to asyncio's "exception was never retrieved").
    marker = tmp_path / "cancelled"
    headers = {"X-Request-ID": "left-then-failed"}
    body = new_body(f"emit-when-cancelled:{marker}")
    with posting(scripted_server, "/assist", body, headers=headers, timeout=10) as response:
        next(iter_events(response))
    assert wait_for_file(marker, timeout=3) == "cancelled"
    expected = "emitted after its response was complete (request left-then-failed)"
    assert wait_until(lambda: expected in scripted_server.log(), 5), scripted_server.log()[-2000:]


def test_a_request_past_the_time_limit_gets_504_then_done_and_the_agent_is_cancelled(scripted_server, tmp_path):
    marker = tmp_path / "cancelled"
    stream = read_stream(scripted_server.url, new_body(f"hang:{marker}"))  # an agent that never ends by itself
    assert_well_ended(stream)
    assert_streams_completed(stream)
    error = next(event for event in stream.events if event["event_name"] == "error")
    assert error["content"]["error_code"] == 504
    assert stream.names()[-1] == "done"
    assert wait_for_file(marker, timeout=2) is not None


def test_a_fast_agent_streams_before_it_finishes_and_ids_keep_to_the_clock(scripted_server, tmp_path):
    count = 20_000
    finish = tmp_path / "finished"
    stream = read_stream(scripted_server.url, new_body(f"fast:{count}:{finish}"))
    assert_well_ended(stream)
    assert_streams_completed(stream)
    chunks = [e for e in stream.events if e["content_type"] == "chunked.text" and not e["is_complete"]]
    assert [c["content"] for c in chunks] == [f"{i} " for i in range(count)]
    assert stream.frames[0].received_at < float(finish.read_text()), "the first event waited for the whole answer"
    for frame, event in zip(stream.frames, stream.events, strict=False):
        stamped = ULID.from_str(event["id"]).timestamp
        assert abs(frame.received_at - stamped) < 1.0, "event id time drifted from the wall clock"


def test_an_agent_emitting_after_complete_gets_response_stream_closed(scripted_server, tmp_path):
    marker = tmp_path / "raised"
    stream = read_stream(scripted_server.url, new_body(f"after-complete:{marker}"))
    assert_well_ended(stream)
    assert stream.names() == ["FINAL", "done"]
    assert wait_for_file(marker, timeout=2) == "ResponseStreamClosedError"
