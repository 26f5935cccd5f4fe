"""A2AAgent: a remote A2A agent as an agent here (docs/a2a.md, "Calling an A2A agent"), against
real uvicorn servers: an agent served by a2a-sdk itself (tests/server/a2a_agents.py's SdkExecutor,
a framework that is not ours), and our own /a2a (ours calling ours). It is used as every agent
is: `Agent(...).run` and `.stream`, `call_agent`, `broadcast_all`, and a host's `Specialist`
served over /assist, whose stream shows the remote agent's text live under its own source."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from sentient_assist import A2AAgent, Agent, AgentResult, broadcast_all, call_agent
from sentient_assist.events import FINAL_RESPONSE
from sentient_assist.facade import AgentEvent
from tests.support.server import ALL_FACES, RunningServer, Servers, free_port, listening_socket, running_server
from tests.support.sse import new_body, read_stream
from tests.support.waiting import until

KEY = "test-key-for-a2a-agent"
OURS = {"ASSIST_AGENT": "tests.server.a2a_agents:A2AFaceAgent", "ASSIST_LOG_LEVEL": "warning", **ALL_FACES}

pytestmark = pytest.mark.timeout(120)


async def events_of(agent: Agent, prompt: str) -> tuple[list[AgentEvent], AgentResult[object]]:
    async with agent.stream(prompt) as stream:
        events = [event async for event in stream]
        return events, stream.result()


@pytest.fixture(scope="module")
def marks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("a2a-marks") / "marks.txt"


@pytest.fixture(scope="module")
def sdk_server(marks: Path) -> Iterator[RunningServer]:
    """The a2a-sdk agent, under uvicorn (`--factory`), as its users serve one."""
    listener = listening_socket()  # its port is in the agent's card: known before it starts
    command = [sys.executable, "-m", "uvicorn", "tests.server.a2a_agents:sdk_app", "--factory"]
    env = {"A2A_TEST_PORT": str(listener.getsockname()[1]), "A2A_TEST_MARKS": str(marks)}
    with running_server(env, command=command, listener=listener) as server:
        yield server


@pytest.fixture(scope="module")
def ours(serve: Servers) -> RunningServer:
    return serve(OURS)


@pytest.fixture(scope="module")
def ours_with_keys(serve: Servers) -> RunningServer:
    return serve({**OURS, "ASSIST_API_KEYS": KEY})


async def test_its_card_names_it(sdk_server: RunningServer) -> None:
    remote = await A2AAgent.connect(sdk_server.url)
    assert remote.name == "sdk-travel"
    assert remote.description == "Books trips (an agent served by a2a-sdk)."
    assert A2AAgent(sdk_server.url).name == sdk_server.url.removeprefix("http://")  # unnamed: its host
    card_url = A2AAgent(sdk_server.url + "/.well-known/agent-card.json")
    assert (await card_url.card()).name == "sdk-travel"


async def test_an_sdk_agents_artifacts_status_and_data_become_our_events(sdk_server: RunningServer) -> None:
    events, result = await events_of(Agent(A2AAgent(sdk_server.url, name="travel")), "hello")
    assert result.errors == ()
    assert result.text == "Hello!"  # its text artifact, as the answer
    assert ("text_block", "STATUS", "Looking it up.") in [(e.kind, e.event_name, e.text) for e in events]
    facts = [event.data for event in events if event.event_name == "A2A_ARTIFACT"]
    assert facts == [{"name": "facts", "data": {"city": "Oslo"}}]


async def test_a_message_only_agent_answers_with_its_message(sdk_server: RunningServer) -> None:
    result = await Agent(A2AAgent(sdk_server.url)).run("message")
    assert result.text == "Just a message." and result.errors == ()


async def test_input_required_is_a_pause_and_the_answer_resumes_the_remote_task(sdk_server: RunningServer) -> None:
    agent = Agent(A2AAgent(sdk_server.url, name="travel"))
    paused = await agent.run("ask")
    assert paused.interrupt is not None and paused.interrupt.question == "Which day?"
    resumed = await agent.resume(paused, "Friday")
    assert resumed.errors == () and resumed.text == "Booked for Friday."
    again = await agent.resume(paused, "Saturday")  # a pause is answered once
    assert again.errors and again.errors[0].code == 409


async def test_its_failures_are_our_error_events(sdk_server: RunningServer) -> None:
    failed = await Agent(A2AAgent(sdk_server.url, name="travel")).run("fail")
    assert [(error.message, error.code) for error in failed.errors] == [("No such city.", 502)]
    port = free_port()  # nobody listens there
    unreachable = await Agent(A2AAgent(f"http://127.0.0.1:{port}", name="gone")).run("hello")
    [error] = unreachable.errors
    assert error.code == 502 and f"127.0.0.1:{port}" in error.message
    no_card = await Agent(A2AAgent(sdk_server.url + "/no-such-card.json", name="none")).run("hello")
    [error] = no_card.errors
    assert error.code == 502 and "404" in error.message


async def test_a_stopped_run_cancels_the_remote_task(sdk_server: RunningServer, marks: Path) -> None:
    async with Agent(A2AAgent(sdk_server.url)).stream("slow") as events:
        async for event in events:
            if event.kind == "text_delta":
                events.cancel()
                break
    # The cancel goes out as the run stops (this loop runs it).
    assert await until(lambda: marks.exists() and "canceled" in marks.read_text(), 10)


def test_its_text_streams_live_under_its_own_source_through_a_host(sdk_server: RunningServer, tmp_path: Path) -> None:
    """A host served over /assist hands off to the A2A agent: the remote's first chunk reaches the
    client while the remote still waits (for a file only the test writes once it has seen it)."""
    gate = tmp_path / "gate"
    seen: list[dict] = []

    def open_the_gate_on_the_first_chunk(frame) -> None:
        data = frame.json
        if data.get("event_name") == FINAL_RESPONSE and data.get("source") == "remote" and data.get("content"):
            seen.append(data)
            gate.write_text("open")

    env = {**OURS, "ASSIST_AGENT": "tests.server.a2a_agents:a2a_host", "A2A_REMOTE_URL": sdk_server.url}
    with running_server(env) as host:
        stream = read_stream(host.url, new_body(f"gate:{gate}"), on_frame=open_the_gate_on_the_first_chunk)
    remote = [e for e in stream.events if e.get("source") == "remote" and e["event_name"] == FINAL_RESPONSE]
    assert "".join(e["content"] for e in remote) == "first second"
    assert seen and seen[0]["content"] == "first "  # seen before the remote went on: live
    assert any(e["event_name"] == "HANDOFF" and e["content"]["to_agent"] == "remote" for e in stream.events)
    assert stream.events[-1]["event_name"] == "done"


async def test_call_agent_and_broadcast_take_it_as_any_agent(sdk_server: RunningServer, ours: RunningServer) -> None:
    called = await call_agent(A2AAgent(sdk_server.url, name="travel"), "Lima", caller="test")
    assert called.result.text == "You said Lima."
    outcomes = await broadcast_all(
        [A2AAgent(sdk_server.url, name="travel"), A2AAgent(ours.url, name="ours")], "echo-history:x", caller="test"
    )
    assert [(outcome.agent, outcome.status) for outcome in outcomes] == [("travel", "ok"), ("ours", "ok")]
    assert outcomes[0].result is not None and outcomes[0].result.text == "You said echo-history:x."
    assert outcomes[1].result is not None and outcomes[1].result.text == "echo-history:x"


async def test_ours_calling_ours_keeps_every_event_name(ours: RunningServer) -> None:
    events, result = await events_of(Agent(A2AAgent(ours.url)), "answer")
    names = [event.event_name for event in events]
    assert names == ["THINKING", "TOOL_CALL", "TOOL_RESULT", "SOURCES", FINAL_RESPONSE, "done"]
    assert result.text == "Forty-two."
    assert result.tool_calls[0].name == "lookup"


async def test_ours_calling_ours_pauses_resumes_and_fails_as_ours(ours: RunningServer) -> None:
    agent = Agent(A2AAgent(ours.url, name="ours"))
    paused = await agent.run("ask:trip")
    assert paused.interrupt is not None
    assert paused.interrupt.question == "Which city?" and paused.interrupt.choices == ("Oslo", "Lima")
    resumed = await agent.resume(paused, "Oslo")
    assert resumed.text == "You chose Oslo (step 1)."
    failed = await agent.run("error")
    assert [(e.message, e.code, e.details) for e in failed.errors] == [
        ("the lookup service is down", 502, {"service": "lookup"})
    ]


async def test_a_key_is_sent_as_a_bearer_key(ours_with_keys: RunningServer) -> None:
    without = await Agent(A2AAgent(ours_with_keys.url, name="keyed")).run("answer")
    assert without.errors and without.errors[0].code == 502 and "401" in without.errors[0].message
    keyed = await Agent(A2AAgent(ours_with_keys.url, name="keyed", api_key=KEY)).run("answer")
    assert keyed.errors == () and keyed.text == "Forty-two."


def test_it_runs_in_any_thread_loop(sdk_server: RunningServer) -> None:
    """Agent.run_sync, from a thread of its own: the card is read in the loop that needs it."""
    results: list[str] = []
    remote = A2AAgent(sdk_server.url, name="travel")
    thread = threading.Thread(target=lambda: results.append(Agent(remote).run_sync("Rome").text))
    thread.start()
    thread.join(30)
    assert results == ["You said Rome."]
