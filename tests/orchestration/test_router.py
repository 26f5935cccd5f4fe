"""RouterAgent: in-process, through the facade, and through a real /assist stream (its rules: test_rules.py)."""

from __future__ import annotations

import pytest
from ulid import ULID

from sentient_assist import Agent
from sentient_assist.orchestration.broadcast import chain
from sentient_assist.orchestration.router import RouterAgent
from sentient_assist.orchestration.rules import Router
from tests.orchestration.broadcast_agents import (
    EchoAgent,
    HangingAgent,
    SlushAgent,
    make_router,
    make_strict_router,
)
from tests.server.test_stream_guarantees import assert_streams_completed, assert_well_ended
from tests.support.sse import new_body, new_session, read_stream

# RouterAgent through the facade


def sources(result) -> dict[str, set[str]]:
    """event_name -> the sources it came from, over the run's wire events."""
    found: dict[str, set[str]] = {}
    for event in result.messages[-1].events:
        found.setdefault(event["event_name"], set()).add(event["source"])
    return found


async def test_router_agent_routes_says_where_and_streams_the_agent_under_its_own_source():
    result = await Agent(make_router()).run("hi there")
    assert result.text == "echo: hi there"
    assert [(s.stage, s.phase, s.capability, s.outcome, s.reason, s.counts) for s in result.stages] == [
        ("route", "end", "echo", "routed", "default", {})
    ]
    assert sources(result) == {"STAGE": {"router"}, "PLAN": {"echo"}, "FINAL_RESPONSE": {"echo"}, "done": {"router"}}
    assert not result.errors


async def test_router_agent_routes_by_metadata_and_by_processor_id():
    question = await Agent(make_router()).run("What time is it?")
    assert question.text == "answerer: What time is it?" and question.stages[0].reason == "questions"
    vip = await Agent(make_router(), processor_id="vip-processor").run("What time is it?")
    assert vip.text == "concierge: What time is it?" and vip.stages[0].reason == "vip"


async def test_router_agent_reads_the_sessions_history_into_its_metadata():
    router = Router(default=EchoAgent("first-turn"))
    router.add(name="follow-up", agent=EchoAgent("second-turn"), metadata={"behavioural.interaction_count": 1})
    agent = Agent(RouterAgent(router))
    first = await agent.run("hello")
    second = await agent.run("hello again", history=first.messages)
    assert (first.stages[0].capability, second.stages[0].capability) == ("first-turn", "second-turn")


async def test_router_agent_lays_fields_of_its_own_over_the_signals():
    router = Router(default=EchoAgent("everyone"))
    router.add(name="long-chats", agent=EchoAgent("long"), metadata={"chat.long": True, "query.is_question": False})

    def fields(session, query):
        return {"chat": {"long": len(query.prompt) > 10}, "query.is_question": False}

    agent = Agent(RouterAgent(router, metadata=fields))
    assert (await agent.run("Is this a long question?")).stages[0].capability == "long"
    assert (await agent.run("short?")).stages[0].capability == "everyone"


async def test_no_route_and_a_refused_call_are_error_events_not_crashes():
    unrouted = await Agent(make_strict_router()).run("goodbye")
    assert [(e.code, e.details) for e in unrouted.errors] == [(404, {"rules": 1})]
    assert "no default agent" in unrouted.errors[0].message
    assert unrouted.stages[0].outcome == "unrouted"
    refused = await Agent(make_router()).run("forbidden fruit")
    assert [(e.code, e.details) for e in refused.errors] == [(403, {"refused": "blocked"})]
    assert "not allowed" in refused.errors[0].message and refused.text == ""


async def test_in_a_chain_the_routed_agents_slush_goes_on_as_the_routers():
    router = RouterAgent(Router(default=SlushAgent("X")))
    first, second = await chain([router, SlushAgent("Y")], "plan it", caller="planner")
    assert (first.status, second.status) == ("ok", "ok")
    assert first.slush.source_agent == "router" and first.slush.signals["by"] == "X"
    assert second.upstream_slush == first.slush and second.slush.signals["upstream"] == "router"


async def test_a_routed_agent_cut_by_the_request_time_limit_still_has_its_stream_ended():
    result = await Agent(RouterAgent(Router(default=HangingAgent("h"))), timeout=0.5).run("go")
    events = result.messages[-1].events
    assert [e["error_code"] for e in (ev["content"] for ev in events if ev["event_name"] == "error")] == [504]
    chunks = [e for e in events if e["content_type"] == "chunked.text"]
    assert chunks and chunks[-1]["is_complete"] and chunks[-1]["source"] == "h"


# RouterAgent through a real /assist stream


ROUTER = {"ASSIST_AGENT": "tests.orchestration.broadcast_agents:make_router", "ASSIST_LOG_LEVEL": "warning"}


@pytest.fixture(scope="module")
def router_server(serve):
    return serve(ROUTER)


def wire(server, prompt: str, processor_id: str = "chat-processor"):
    stream = read_stream(server.url, new_body(prompt, new_session(processor_id)))
    assert_well_ended(stream)
    assert_streams_completed(stream)
    return stream


def test_router_over_assist_sends_the_stage_then_the_agents_events_under_its_own_source(router_server):
    stream = wire(router_server, "hi there")
    assert stream.names() == ["STAGE", "PLAN", "FINAL_RESPONSE", "FINAL_RESPONSE", "FINAL_RESPONSE", "done"]
    stage = stream.events[0]
    assert stage["source"] == "chat-processor"
    assert stage["content"] == {
        "stage": "route",
        "phase": "end",
        "capability": "echo",
        "outcome": "routed",
        "reason": "default",
        "counts": {},
    }
    assert {e["source"] for e in stream.events[1:-1]} == {"echo"}
    assert "".join(e["content"] for e in stream.events if e["event_name"] == "FINAL_RESPONSE") == "echo: hi there"
    assert stream.events[-1]["source"] == "chat-processor"


def test_router_over_assist_routes_by_the_sessions_processor_id(router_server):
    stream = wire(router_server, "hello", processor_id="vip-processor")
    assert stream.events[0]["content"]["reason"] == "vip"
    assert {e["source"] for e in stream.events if e["event_name"] == "FINAL_RESPONSE"} == {"concierge"}


def test_router_over_assist_turns_no_route_and_a_refusal_into_error_events(router_server):
    nested = wire(router_server, "strict goodbye")  # the router sends it to a router with no default
    assert nested.names() == ["STAGE", "STAGE", "error", "done"]
    outer, inner, error = nested.events[:3]
    assert (outer["content"]["capability"], inner["source"], inner["content"]["outcome"]) == (
        "strict-router",
        "strict-router",
        "unrouted",
    )
    assert error["source"] == "strict-router" and error["content"]["error_code"] == 404
    refused = wire(router_server, "forbidden fruit")
    assert refused.names() == ["STAGE", "error", "done"]
    assert refused.events[1]["content"]["details"] == {"refused": "blocked"}
    assert refused.events[1]["content"]["error_code"] == 403


def interaction(sender: str | None, recipients: list[str] | None) -> dict:
    return {
        "request": {
            "sender": sender,
            "recipients": recipients,
            "event": {
                "id": str(ULID()),
                "chat_id": str(ULID()),
                "content": {"capability": "assist", "request_payload": {"parts": [{"prompt": "earlier"}]}},
            },
        },
        "responses": [],
    }


def test_over_assist_sender_and_groups_come_from_the_sessions_last_request(serve):
    server = serve({"ASSIST_AGENT": "tests.orchestration.broadcast_agents:who_router"})

    def routed_to(interactions: list) -> str:
        stream = read_stream(server.url, new_body("hello", new_session("who", interactions)))
        (stage,) = [e["content"] for e in stream.events if e["event_name"] == "STAGE"]
        return stage["capability"]

    assert routed_to([]) == "for-anyone"
    assert routed_to([interaction("ana", None)]) == "for-ana"
    assert routed_to([interaction("bo", ["users", "admins"])]) == "for-admins"
    assert routed_to([interaction("bo", ["users"])]) == "for-anyone"
