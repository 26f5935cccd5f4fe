"""broadcast_all, race, fallback and chain: in-process, through the facade, and through a real /assist stream."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from sentient_assist import Agent
from sentient_assist.compat import DataSlush
from sentient_assist.orchestration import CallPolicy
from sentient_assist.orchestration.broadcast import StopOnFailure, broadcast_all, chain, fallback, race
from tests.orchestration.broadcast_agents import (
    FailingAgent,
    HangingAgent,
    SlushAgent,
    make_chain,
    make_fallback,
    make_race,
)
from tests.orchestration.test_router import ROUTER
from tests.server.test_stream_guarantees import assert_streams_completed, assert_well_ended
from tests.support.files import wait_for_file
from tests.support.sse import new_body, new_session, read_stream
from tests.support.waiting import until

pytestmark = pytest.mark.timeout(60)


def others() -> set[asyncio.Task]:
    return asyncio.all_tasks() - {asyncio.current_task()}


def statuses(outcomes) -> list[tuple[str, str]]:
    return [(outcome.agent, outcome.status) for outcome in outcomes]


# broadcast_all


async def test_broadcast_all_runs_every_agent_and_reports_each_failure_in_order():
    agents = [SlushAgent("a", delay=0.02), FailingAgent("b"), FailingAgent("c", mode="raise"), SlushAgent("d")]
    outcomes = await broadcast_all(agents, "hello")
    assert statuses(outcomes) == [("a", "ok"), ("b", "failed"), ("c", "failed"), ("d", "ok")]
    a, b, c, _d = outcomes
    assert a.result.text == "a answers" and a.error is None and a.slush.source_agent == "a"
    assert b.error == "b could not answer (502)" and b.result.errors[0].details == {"agent": "b"}
    assert "500" in c.error and c.result is not None and c.slush is None
    assert not others()


async def test_a_refused_call_is_an_outcome_not_an_exception():
    policy = CallPolicy(block=frozenset({"b"}))
    outcomes = await broadcast_all([SlushAgent("a"), SlushAgent("b")], "hello", caller="host", policy=policy)
    assert statuses(outcomes) == [("a", "ok"), ("b", "refused")]
    assert "not allowed" in outcomes[1].error and outcomes[1].result is None


async def test_a_call_past_its_timeout_is_cancelled_and_reported_as_timeout(tmp_path):
    outcomes = await broadcast_all([HangingAgent("h"), SlushAgent("s")], f"go markers={tmp_path}", timeout=1.0)
    assert statuses(outcomes) == [("h", "timeout"), ("s", "ok")]
    assert "1.0s" in outcomes[0].error and outcomes[0].result is None
    assert (tmp_path / "h.cancelled").exists()  # stopped by the time the call returned
    assert not others()


@pytest.mark.parametrize("strategy", [broadcast_all, race], ids=["broadcast_all", "race"])
async def test_cancelling_the_caller_cancels_every_agent(strategy, tmp_path):
    task = asyncio.create_task(strategy([HangingAgent("h1"), HangingAgent("h2")], f"go markers={tmp_path}"))
    assert await until(lambda: (tmp_path / "h1.started").exists() and (tmp_path / "h2.started").exists(), 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert (tmp_path / "h1.cancelled").exists() and (tmp_path / "h2.cancelled").exists()
    assert not others()


# race


async def test_race_the_first_success_wins_and_the_losers_are_cancelled(tmp_path):
    agents = [
        HangingAgent("slow-1"),
        FailingAgent("broken"),
        SlushAgent("quick", after_started=("slow-1", "slow-2")),
        HangingAgent("slow-2"),
    ]
    result = await race(agents, f"go markers={tmp_path}")
    assert result.winner is not None and result.winner.agent == "quick" and result.winner.result.text == "quick answers"
    # "broken" failed before the winner answered: a failure does not end the race.
    assert statuses(result.outcomes) == [
        ("slow-1", "cancelled"),
        ("broken", "failed"),
        ("quick", "ok"),
        ("slow-2", "cancelled"),
    ]
    assert (tmp_path / "slow-1.cancelled").exists() and (tmp_path / "slow-2.cancelled").exists()
    assert not others()


async def test_a_race_nobody_wins_has_no_winner():
    result = await race([FailingAgent("x"), FailingAgent("y", mode="raise")], "go")
    assert result.winner is None and statuses(result.outcomes) == [("x", "failed"), ("y", "failed")]


# fallback


async def test_fallback_passes_each_failures_slush_on_until_one_succeeds():
    agents = [
        FailingAgent("first", publish={"tried": "first"}),
        FailingAgent("second", mode="raise"),
        SlushAgent("third"),
        SlushAgent("never"),
    ]
    result = await fallback(agents, "help")
    assert statuses(result.outcomes) == [("first", "failed"), ("second", "failed"), ("third", "ok")]
    first, second, third = result.outcomes
    assert result.winner == third and third.result.text == "third answers after second"
    # What "first" published is what "second" was given...
    published = DataSlush(source_agent="first", signals={"tried": "first"}, confidence=0.4)
    assert second.upstream_slush == first.slush == published
    # ... and "second" published nothing, so "third" was told that it failed, and why.
    handed = third.upstream_slush
    assert handed.source_agent == "second" and handed.confidence == 0
    assert handed.signals["failed"] is True and "500" in handed.signals["error"]
    assert third.slush.signals["upstream"] == "second"  # seen by the agent, through current_context()


async def test_a_timeout_in_a_fallback_is_handed_on_as_a_failure(tmp_path):
    result = await fallback([HangingAgent("h"), SlushAgent("s")], f"go markers={tmp_path}", timeout=1.0)
    assert statuses(result.outcomes) == [("h", "timeout"), ("s", "ok")]
    assert result.outcomes[1].upstream_slush.signals["status"] == "timeout"
    assert (tmp_path / "h.cancelled").exists()


async def test_a_fallback_where_every_agent_fails_has_no_winner():
    result = await fallback([FailingAgent("x"), FailingAgent("y")], "go")
    assert result.winner is None and statuses(result.outcomes) == [("x", "failed"), ("y", "failed")]


# chain


async def test_a_slush_chain_of_three_each_sees_the_previous_ones_slush():
    a, b, c = await chain([SlushAgent("A"), SlushAgent("B"), SlushAgent("C")], "plan a trip", caller="planner")
    assert statuses([a, b, c]) == [("A", "ok"), ("B", "ok"), ("C", "ok")]
    assert (a.upstream_slush, b.upstream_slush, c.upstream_slush) == (None, a.slush, b.slush)
    assert [o.slush.signals["upstream"] for o in (a, b, c)] == [None, "A", "B"]
    assert "builds on B" in c.slush.signals["hints"]  # C's context.orientation
    assert c.slush.signals["upstream_signals"]["upstream"] == "A"
    assert c.slush.signals["chain"] == ["planner", "C"]


async def test_a_chain_can_stop_at_its_first_failure():
    outcomes = await chain([SlushAgent("A"), FailingAgent("B"), SlushAgent("C")], "go", stop_on_failure=StopOnFailure())
    assert statuses(outcomes) == [("A", "ok"), ("B", "failed")]
    on = await chain([SlushAgent("A"), FailingAgent("B"), SlushAgent("C")], "go")
    assert statuses(on) == [("A", "ok"), ("B", "failed"), ("C", "ok")]
    assert on[2].upstream_slush.signals["failed"] is True
    two_failures = [FailingAgent("B"), SlushAgent("A"), FailingAgent("C"), SlushAgent("D")]
    assert statuses(await chain(two_failures, "go", stop_on_failure=StopOnFailure(after=2))) == [
        ("B", "failed"),
        ("A", "ok"),
        ("C", "failed"),
    ]
    with pytest.raises(ValueError, match="after"):
        StopOnFailure(after=0)


async def test_slush_lives_in_the_request_not_on_the_agents():
    agents = [SlushAgent("A"), SlushAgent("B")]
    before = [dict(vars(agent)) for agent in agents]
    first, second = await asyncio.gather(
        chain(agents, "one", upstream_slush=DataSlush(source_agent="left", signals={})),
        chain(agents, "two", upstream_slush=DataSlush(source_agent="right", signals={})),
    )
    assert [o.slush.signals["upstream"] for o in first] == ["left", "A"]
    assert [o.slush.signals["upstream"] for o in second] == ["right", "A"]
    assert [dict(vars(agent)) for agent in agents] == before


# The orchestrators, through the facade and through a real /assist stream


def summary_of(events: list[dict]) -> dict:
    (summary,) = [event["content"] for event in events if event["event_name"] == "SUMMARY"]
    return summary


def check_race(summary: dict, text: str, markers: Path) -> None:
    assert summary["winner"] == "quick" and text == "quick answers"
    assert [(o["agent"], o["status"]) for o in summary["outcomes"]] == [
        ("slow-1", "cancelled"),
        ("broken", "failed"),
        ("quick", "ok"),
        ("slow-2", "cancelled"),
    ]
    for name in ("slow-1", "slow-2"):
        assert wait_for_file(markers / f"{name}.cancelled", timeout=10) == "cancelled"


def check_fallback(summary: dict, text: str) -> None:
    assert summary["winner"] == "third" and text == "third answers after second"
    first, second, third = summary["outcomes"]
    assert (
        second["upstream"]
        == first["slush"]
        == {"source_agent": "first", "signals": {"tried": "first", "partial": 1}, "confidence": 0.4}
    )
    assert third["upstream"]["signals"]["failed"] is True and third["upstream"]["source_agent"] == "second"


def check_chain(summary: dict, text: str) -> None:
    assert summary["winner"] == "C" and text == "C answers after B"
    a, b, c = summary["outcomes"]
    assert (b["upstream"], c["upstream"]) == (a["slush"], b["slush"])
    assert "builds on B" in c["slush"]["signals"]["hints"]


async def test_the_orchestrators_through_the_facade(tmp_path):
    raced = await Agent(make_race()).run(f"go markers={tmp_path}")
    check_race(raced.messages[-1].events[0]["content"], raced.text, tmp_path)
    fell = await Agent(make_fallback()).run("go")
    check_fallback(fell.messages[-1].events[0]["content"], fell.text)
    chained = await Agent(make_chain()).run("go")
    check_chain(chained.messages[-1].events[0]["content"], chained.text)
    assert not (raced.errors or fell.errors or chained.errors)
    assert not others()


@pytest.fixture(scope="module")
def orchestrating_server(serve):
    """The router of broadcast_agents: `race ...`, `fallback ...` and `chain ...` go to the orchestrators
    (the same server as test_router's)."""
    return serve(ROUTER)


def over_assist(server, prompt: str) -> tuple[dict, str, list[dict]]:
    stream = read_stream(server.url, new_body(prompt, new_session("chat")))
    assert_well_ended(stream)
    assert_streams_completed(stream)
    strategy = prompt.split()[0]
    events = stream.events
    assert events[0]["event_name"] == "STAGE" and events[0]["content"]["capability"] == strategy
    # The orchestrator's own events stream through under its own source.
    assert {e["source"] for e in events[1:-1]} == {strategy}
    text = "".join(e["content"] for e in events if e["event_name"] == "FINAL_RESPONSE")
    return summary_of(events), text, events


def test_race_over_assist(orchestrating_server, tmp_path):
    summary, text, _ = over_assist(orchestrating_server, f"race markers={tmp_path}")
    check_race(summary, text, tmp_path)


def test_fallback_over_assist(orchestrating_server):
    summary, text, _ = over_assist(orchestrating_server, "fallback please")
    check_fallback(summary, text)


def test_chain_over_assist(orchestrating_server):
    summary, text, _ = over_assist(orchestrating_server, "chain of thought")
    check_chain(summary, text)
    # Nested under the router, each agent's context records the whole chain of calls.
    assert summary["outcomes"][2]["slush"]["signals"]["chain"] == ["router", "chain", "C"]
