"""A run that stops to ask a person, and the answer that resumes it: in-process, over HTTP,
and as raw Sentient Chat history; tokens that were not issued here for this conversation
are refused and nothing runs."""

from __future__ import annotations

import asyncio
import base64
import time
from typing import Any

import pytest
from ulid import ULID

from sentient_assist import Agent, AgentResult
from sentient_assist.protocol import Message
from sentient_assist.protocol.history import interactions_from
from sentient_assist.registry import load_agent
from sentient_assist.runtime import pauses
from tests.support.agents import ScriptedAgent
from tests.support.sse import new_body, new_session, read_stream

PROCESSOR = "pause-test"


@pytest.fixture(scope="module")
def both(request) -> tuple[Agent, Agent]:
    scripted_server = request.getfixturevalue("scripted_server")
    return (
        Agent(ScriptedAgent(), processor_id=PROCESSOR),
        Agent(scripted_server.url + "/assist", processor_id=PROCESSOR),
    )


def resumed_document(result: AgentResult[Any]) -> dict[str, Any] | None:
    events = result.messages[-1].events
    return next((e["content"] for e in events if e["event_name"] == "RESUMED"), None)


def with_token(messages: tuple[Message, ...], change) -> tuple[Message, ...]:
    """The conversation with the pause's token changed by `change`."""
    *earlier, last = messages
    events = []
    for event in last.events:
        if event["event_name"] == "ASK_USER":
            event = {**event, "content": {**event["content"], "token": change(event["content"]["token"])}}
        events.append(event)
    return (*earlier, last.model_copy(update={"events": tuple(events)}))


async def test_a_run_asks_ends_and_the_answer_resumes_it_with_its_state_in_process_and_over_http(both):
    for agent in both:
        paused = await agent.run("ask:weather")
        asked = paused.interrupt
        assert asked is not None and asked.resumable and asked.token
        assert (asked.kind, asked.question, asked.choices) == ("ask_user", "Which city?", ("Oslo", "Lima"))
        assert paused.text == "I need to know one thing."
        names = [event["event_name"] for event in paused.messages[-1].events]
        assert names[-2:] == ["ASK_USER", "done"]  # the response ended with the question
        resumed = await agent.resume(paused, "Oslo")
        assert resumed_document(resumed) == {
            "answer": "Oslo",
            "state": {"step": 1, "asked": "weather"},
            "question": "Which city?",
            "kind": "ask_user",
        }
        assert not resumed.errors


async def test_raw_sentient_chat_history_resumes_the_pause(both, scripted_server):
    _, remote = both
    paused = await remote.run("ask:raw")
    # What Sentient Chat sends: the answer as the prompt, the question's turn in the interactions.
    chat = ULID()
    interactions = [i.model_dump(mode="json") for i in interactions_from(paused.messages, chat, PROCESSOR)]
    session = {**new_session(PROCESSOR, interactions), "activity_id": str(chat)}
    stream = await asyncio.to_thread(read_stream, scripted_server.url, new_body("Lima", session))
    assert stream.status == 200
    (resumed,) = [event for event in stream.events if event["event_name"] == "RESUMED"]
    assert resumed["content"]["answer"] == "Lima" and resumed["content"]["state"] == {"step": 1, "asked": "raw"}


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (lambda token: token[:40] + ("A" if token[40] != "A" else "B") + token[41:], "not issued by this service"),
        (lambda token: "x" + token, "not one this service issues"),
        (lambda token: token + "x", "not one this service issues"),
        (lambda token: "not-a-token", "not one this service issues"),
    ],
)
async def test_a_forged_token_is_refused_with_an_error_and_nothing_runs(both, change, said):
    for agent in both:
        paused = await agent.run("ask:forged")
        forged = await agent.run("Oslo", history=with_token(paused.messages, change))
        assert resumed_document(forged) is None  # the agent never ran
        (error,) = forged.errors
        assert error.code == 400 and said in error.message and error.details["refused"] == "resume"


async def test_a_token_reused_on_another_history_is_refused(both):
    for agent in both:
        paused = await agent.run("ask:elsewhere")
        other = (Message(role="user", content="an earlier turn"), Message(role="assistant", content="ok"))
        moved = await agent.run("Oslo", history=other + paused.messages)
        (error,) = moved.errors
        assert "another conversation" in error.message and resumed_document(moved) is None


async def test_an_expired_pause_is_refused(monkeypatch):
    agent = Agent(ScriptedAgent(), processor_id=PROCESSOR)
    paused = await agent.run("ask:late")
    in_time = await agent.run("Oslo", history=paused.messages)
    assert resumed_document(in_time) is not None
    later = time.time() + pauses.PROCESS_SEALER.ttl + 5
    monkeypatch.setattr(pauses.time, "time", lambda: later)
    late = await agent.run("Oslo", history=paused.messages)
    (error,) = late.errors
    assert "expired" in error.message and resumed_document(late) is None


def test_a_token_cannot_be_read_without_the_secret():
    sealed = pauses.PauseSealer(b"a secret of at least 16 bytes")
    pause = pauses.Pause(kind="ask_user", source="a", digest="d", state={"told the model": "an internal detail"})
    token = sealed.issue(pause)
    assert b"internal" not in base64.urlsafe_b64decode(token + "==")
    assert sealed.verify(token, digest="d") == pause
    with pytest.raises(pauses.PauseRefused):
        pauses.PauseSealer(b"another secret, 16 bytes or more").verify(token, digest="d")


async def test_resume_needs_a_resumable_pause(both):
    local, _ = both
    finished = await local.run("every-event")
    with pytest.raises(ValueError, match="not resumable"):
        await local.resume(finished, "anything")


async def test_the_trip_agent_asks_then_plans_for_the_city_answered():
    trip = Agent(load_agent("trip"))
    paused = await trip.run("Plan a day out")
    assert paused.interrupt is not None and paused.interrupt.choices == ("Oslo", "Lima", "Kyoto")
    planned = await trip.resume(paused, "Kyoto")
    assert planned.text.startswith("A day in Kyoto, as you asked ('Plan a day out')")


def test_a_token_past_the_size_bound_is_refused_before_any_decoding():
    sealed = pauses.PauseSealer(b"a secret of at least 16 bytes")
    with pytest.raises(pauses.PauseRefused, match="not one this service issues"):
        sealed.verify("A" * (pauses.MAX_TOKEN_CHARS + 4), digest="d")
