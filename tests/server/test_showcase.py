"""The default agent, served as the README says, shows every event type."""

from __future__ import annotations

from tests.server.test_stream_guarantees import assert_streams_completed, assert_well_ended
from tests.support.sse import new_body, read_stream


def test_a_prompt_gets_a_plan_sources_and_a_streamed_answer(showcase_server):
    stream = read_stream(showcase_server.url, new_body("What can you do?"))
    assert_well_ended(stream)
    assert_streams_completed(stream)
    names = stream.names()
    assert names[:2] == ["PLAN", "SOURCES"]
    assert set(names[2:-1]) == {"FINAL_RESPONSE"} and len(names) > 10
    assert stream.events[1]["content"]["results"]
    answer = "".join(e["content"] for e in stream.events if e["event_name"] == "FINAL_RESPONSE")
    assert "What can you do?" in answer
    arrivals = [f.received_at for f in stream.frames if f.event_name == "FINAL_RESPONSE"]
    assert arrivals[-1] - arrivals[0] > 0.2, "the answer should stream, word by word"
    assert {e["source"] for e in stream.events} == {"showcase"}


def test_the_error_prompt_shows_an_error_event_and_goes_on(showcase_server):
    stream = read_stream(showcase_server.url, new_body("error"))
    assert_well_ended(stream)
    error = next(e for e in stream.events if e["event_name"] == "error")
    assert error["content"]["error_code"] == 400
    assert stream.names().index("error") < stream.names().index("FINAL_RESPONSE")
