"""agents/concierge.py offline: a host handing off to the showcase agent and the assistant."""

from __future__ import annotations

import pytest

from sentient_assist import Agent
from sentient_assist.registry import load_agent
from tests.server.test_stream_guarantees import assert_streams_completed, assert_well_ended
from tests.support.sse import new_body, read_stream


@pytest.fixture(scope="module")
def concierge_server(serve):
    return serve({"ASSIST_AGENT": "concierge", "MODEL_NAME": ""})


@pytest.fixture
def concierge(monkeypatch):
    monkeypatch.setenv("MODEL_NAME", "")
    return Agent(load_agent("concierge"))


async def test_arithmetic_goes_to_the_assistant_and_its_tool(concierge):
    result = await concierge.run("what is 12 * 7?")
    assert [(c.name, c.result) for c in result.tool_calls] == [("calculate", 84)]
    assert result.text == "Let me ask the assistant.\n\nThe calculate tool says: 84"


async def test_other_questions_go_to_the_showcase_and_a_greeting_is_answered_directly(concierge):
    shown = await concierge.run("show me the events")
    assert "You asked: 'show me the events'" in shown.text
    greeted = await concierge.run("hello there")
    assert greeted.text.startswith("Hello!") and not greeted.tool_calls


def test_the_concierge_streams_through_a_real_assist(concierge_server):
    stream = read_stream(concierge_server.url, new_body("what is 6 * 7?"))
    assert_well_ended(stream)
    assert_streams_completed(stream)
    sources = [e["source"] for e in stream.events]
    assert sources[0] == "concierge" and "assistant" in sources
    handoff = next(e["content"] for e in stream.events if e["event_name"] == "HANDOFF")
    assert handoff["to_agent"] == "assistant"
    result = next(e["content"] for e in stream.events if e["event_name"] == "TOOL_RESULT")
    assert result == {"id": result["id"], "name": "calculate", "result": 42, "error": None}
