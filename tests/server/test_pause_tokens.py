"""A pause's token is bound to the agent that issued it, and a pause is answered once (issue 23,
item 5): on real servers, two agents `alpha` and `beta` sharing ASSIST_RESUME_SECRET, and an
LLMAgent whose tool needs approval. Each continuation marks a file (tests/server/pause_agents.py):
what ran is counted there, not inferred from the answers."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from sentient_assist import Agent, AgentResult
from sentient_assist.runtime import pauses
from sentient_assist.server.openai.pauses import take_marker
from tests.server import pause_agents
from tests.support.server import RunningServer, Servers, running_server

SECRET = "one secret shared by alpha and beta, 16 bytes or more"
REPLAYS = 20


class Served:
    def __init__(self, server: RunningServer, marks: Path) -> None:
        self.url = server.url
        self.marks = marks

    def agent(self, processor_id: str | None = None) -> Agent:
        return Agent(self.url + "/assist", processor_id=processor_id)

    def ran(self) -> list[dict[str, Any]]:
        """What the agent's continuations marked since the test began."""
        if not self.marks.exists():
            return []
        return [json.loads(line) for line in self.marks.read_text().splitlines()]


def agent_env(agent: str, marks: Path) -> dict[str, str]:
    return {
        "ASSIST_AGENT": f"tests.server.pause_agents:{agent}",
        "ASSIST_RESUME_SECRET": SECRET,
        "ASSIST_LOG_LEVEL": "warning",
        pause_agents.MARKS: str(marks),
    }


@pytest.fixture(scope="module")
def alpha(serve: Servers, tmp_path_factory: pytest.TempPathFactory) -> Served:
    marks = tmp_path_factory.mktemp("alpha") / "alpha.marks"
    return Served(serve(agent_env("alpha", marks)), marks)


@pytest.fixture(scope="module")
def beta(serve: Servers, tmp_path_factory: pytest.TempPathFactory) -> Served:
    marks = tmp_path_factory.mktemp("beta") / "beta.marks"
    return Served(serve(agent_env("beta", marks)), marks)


@pytest.fixture
def approver(tmp_path: Path) -> Iterator[Served]:
    # One server per test: its ScriptedModel plays its script once.
    marks = tmp_path / "approver.marks"
    with running_server(agent_env("approver", marks)) as server:
        yield Served(server, marks)


@pytest.fixture(autouse=True)
def no_marks_yet(request: pytest.FixtureRequest) -> None:
    for name in ("alpha", "beta"):
        if name in request.fixturenames:
            served: Served = request.getfixturevalue(name)
            served.marks.unlink(missing_ok=True)


def resumed_document(result: AgentResult[Any]) -> dict[str, Any] | None:
    events = result.messages[-1].events
    return next((e["content"] for e in events if e["event_name"] == "RESUMED"), None)


def event_names(result: AgentResult[Any]) -> list[str]:
    return [event["event_name"] for event in result.messages[-1].events]


def assert_already_answered(result: AgentResult[Any]) -> None:
    (error,) = result.errors
    assert error.code == 409 and "already answered" in error.message, error
    assert error.details["refused"] == "resume"
    assert event_names(result)[-2:] == ["error", "done"]


async def test_a_token_from_alpha_is_refused_by_beta_even_sent_as_alpha(alpha: Served, beta: Served):
    paused = await alpha.agent("alpha").run("hello")
    assert paused.interrupt is not None and paused.interrupt.resumable
    # beta shares the secret: the token opens, but it is alpha's pause, whatever the client says.
    refused = await beta.agent("alpha").resume(paused, "Oslo")
    assert resumed_document(refused) is None
    (error,) = refused.errors
    assert error.code == 400 and "another agent" in error.message and error.details["refused"] == "resume"
    assert beta.ran() == []
    # The issuer resumes it, and the processor_id the client sends plays no part in that either.
    resumed = await alpha.agent("beta").resume(paused, "Oslo")
    assert not resumed.errors
    assert resumed_document(resumed) == {"by": "alpha", "state": {"asked_by": "alpha"}, "answer": "Oslo"}
    assert alpha.ran() == [{"agent": "alpha", "state": {"asked_by": "alpha"}}]


async def test_the_same_answer_replayed_in_parallel_runs_the_continuation_once(alpha: Served):
    paused = await alpha.agent().run("hello")
    results = await asyncio.gather(*(alpha.agent().resume(paused, "Oslo") for _ in range(REPLAYS)))
    resumed = [result for result in results if not result.errors]
    assert len(resumed) == 1 and resumed_document(resumed[0]) is not None
    refused = [result for result in results if result.errors]
    assert len(refused) == REPLAYS - 1
    for result in refused:
        assert resumed_document(result) is None
        assert_already_answered(result)
    assert len(alpha.ran()) == 1
    # And later, one more replay: refused as well.
    assert_already_answered(await alpha.agent().resume(paused, "Oslo"))
    assert len(alpha.ran()) == 1


async def test_an_approval_replayed_in_parallel_runs_the_tool_once(approver: Served):
    paused = await approver.agent().run("Send Ana the thing.")
    pending = paused.interrupt
    assert pending is not None and pending.kind == "interrupt" and pending.reason == "approval"
    assert approver.ran() == []
    results = await asyncio.gather(*(approver.agent().resume(paused, "yes") for _ in range(REPLAYS)))
    approved = [result for result in results if not result.errors]
    assert len(approved) == 1 and approved[0].text == "Done."
    for result in results:
        if result.errors:
            assert_already_answered(result)
    assert approver.ran() == [{"sent": "ana"}]


async def test_an_approval_resumed_twice_in_process_runs_the_tool_once(tmp_path: Path, monkeypatch):
    monkeypatch.setenv(pause_agents.MARKS, str(tmp_path / "marks"))
    agent = Agent(pause_agents.approver())
    paused = await agent.run("Send Ana the thing.")
    approved = await agent.resume(paused, "yes")
    assert not approved.errors and approved.text == "Done."
    assert_already_answered(await agent.resume(paused, "yes"))
    assert (tmp_path / "marks").read_text().splitlines() == ['{"sent": "ana"}']


async def test_the_openai_face_answers_a_pause_once_and_refuses_a_replay_in_its_error_shape(alpha: Served):
    def user(text: str) -> dict[str, str]:
        return {"role": "user", "content": text}

    async with httpx.AsyncClient(base_url=alpha.url, timeout=30) as client:
        asked = await client.post("/v1/chat/completions", json={"model": "alpha", "messages": [user("hello")]})
        content = asked.json()["choices"][0]["message"]["content"]
        assert take_marker(content)[1] is not None
        answered = [user("hello"), {"role": "assistant", "content": content}, user("Oslo")]
        bodies = [{"model": "alpha", "messages": answered, "stream": index % 2 == 1} for index in range(REPLAYS)]
        replies = await asyncio.gather(*(client.post("/v1/chat/completions", json=body) for body in bodies))
    statuses = sorted(reply.status_code for reply in replies)
    assert statuses == [200] + [409] * (REPLAYS - 1)
    for reply in replies:
        if reply.status_code == 409:
            error = reply.json()["error"]
            assert "already answered" in error["message"] and error["type"] == "invalid_request_error"
            assert error["param"] == "messages[1].content"
    assert len(alpha.ran()) == 1


async def test_a_token_from_alpha_is_refused_by_betas_openai_face(alpha: Served, beta: Served):
    def user(text: str) -> dict[str, str]:
        return {"role": "user", "content": text}

    async with httpx.AsyncClient(timeout=30) as client:
        asked = await client.post(alpha.url + "/v1/chat/completions", json={"model": "alpha", "messages": [user("hi")]})
        content = asked.json()["choices"][0]["message"]["content"]
        answered = [user("hi"), {"role": "assistant", "content": content}, user("Oslo")]
        refused = await client.post(beta.url + "/v1/chat/completions", json={"model": "beta", "messages": answered})
    assert refused.status_code == 400 and "another agent" in refused.json()["error"]["message"]
    assert beta.ran() == []


def test_each_token_has_its_own_id():
    sealer = pauses.PauseSealer(b"a secret of at least 16 bytes")
    one, other = (pauses.Pause(kind="ask_user", source="a", digest="d") for _ in range(2))
    assert one.id != other.id
    assert sealer.verify(sealer.issue(one), digest="d").id == one.id


async def test_the_answered_pauses_in_memory_are_bounded_and_never_forget_into_a_replay():
    now = [0.0]
    answered = pauses.InMemoryAnsweredPauses(cap=3, clock=lambda: now[0])
    assert [await answered.claim(name, expiry) for name, expiry in (("a", 10), ("b", 20), ("c", 30))] == [True] * 3
    assert not await answered.claim("a", 10)  # answered already
    assert await answered.claim("d", 40)  # at the cap: the one expiring first (a) is forgotten...
    assert len(answered) == 3
    assert not await answered.claim("a", 10)  # ...and a token as old is refused from then on
    assert not await answered.claim("e", 10)
    assert await answered.claim("f", 41)  # b forgotten: {c, d, f}
    now[0] = 35.0  # c has expired: forgotten (a token of its no longer verifies), a place free
    assert await answered.claim("g", 50)
    assert len(answered) == 3  # d, f and g
    assert not await answered.claim("d", 40)
    assert not await answered.claim("h", 35)  # expiring now: refused, never held


KEY_A, KEY_B = "the-key-of-a-first-client", "the-key-of-a-second-client"


@pytest.fixture(scope="module")
def keyed(serve: Servers, tmp_path_factory: pytest.TempPathFactory) -> Served:
    marks = tmp_path_factory.mktemp("keyed") / "keyed.marks"
    env = {**agent_env("alpha", marks), "ASSIST_API_KEYS": f"{KEY_A},{KEY_B}", "ASSIST_FACES": "assist,openai,agui"}
    return Served(serve(env), marks)


async def test_a_pause_answers_only_to_the_key_that_asked(keyed: Served):
    keyed.marks.unlink(missing_ok=True)
    paused = await Agent(keyed.url + "/assist", api_key=KEY_A).run("hello")
    assert paused.interrupt is not None
    refused = await Agent(keyed.url + "/assist", api_key=KEY_B).resume(paused, "Oslo")
    (error,) = refused.errors
    assert error.code == 400 and "another key" in error.message and error.details["refused"] == "resume"
    assert keyed.ran() == []
    # Refused, not used up: the key that asked answers it (however its header spells the scheme).
    resumed = await Agent(keyed.url + "/assist", api_key=KEY_A).resume(paused, "Oslo")
    assert not resumed.errors and resumed_document(resumed) is not None
    assert len(keyed.ran()) == 1


async def test_the_openai_faces_pause_answers_only_to_the_key_that_asked(keyed: Served):
    def user(text: str) -> dict[str, str]:
        return {"role": "user", "content": text}

    async with httpx.AsyncClient(base_url=keyed.url, timeout=30) as client:
        a, b = ({"Authorization": f"Bearer {key}"} for key in (KEY_A, KEY_B))
        asked = await client.post("/v1/chat/completions", json={"model": "alpha", "messages": [user("hi")]}, headers=a)
        content = asked.json()["choices"][0]["message"]["content"]
        answered = {"model": "alpha", "messages": [user("hi"), {"role": "assistant", "content": content}, user("Oslo")]}
        refused = await client.post("/v1/chat/completions", json=answered, headers=b)
        assert refused.status_code == 400 and "another key" in refused.json()["error"]["message"]
        assert (await client.post("/v1/chat/completions", json=answered, headers=a)).status_code == 200


def test_an_agui_interrupt_answers_only_in_its_thread_and_to_its_key(keyed: Served):
    def run(thread: str, key: str, **fields: Any) -> httpx.Response:
        body = {"threadId": thread, "runId": "r", "messages": [{"id": "u", "role": "user", "content": "hi"}], **fields}
        return httpx.post(keyed.url + "/agui", json=body, headers={"Authorization": f"Bearer {key}"}, timeout=30)

    asked = run("thread-1", KEY_A)
    finished = json.loads([line for line in asked.text.splitlines() if line.startswith("data:")][-1][5:])
    [interrupt] = finished["outcome"]["interrupts"]
    resume = [{"interruptId": interrupt["id"], "status": "resolved", "payload": "Oslo"}]
    for thread, key in (("thread-1", KEY_B), ("thread-2", KEY_A)):
        refused = run(thread, key, resume=resume)
        assert refused.status_code == 400 and "resume[0].interruptId" in refused.text, (thread, key)
        assert "another thread" in refused.text
    assert run("thread-1", KEY_A, resume=resume).status_code == 200
