"""Each app keeps the Settings it was built with (issue 22, item 3): two apps in one process, each
on a real uvicorn on loopback, keep their own body limit, resume secret and header limits; an
app of your own with add_routes seals pauses with the secret of its `settings`."""

from __future__ import annotations

import socket
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from sentient_assist import AbstractAgent, Agent, Query, ResponseHandler, Session, add_routes, create_app, load_settings
from sentient_assist.runtime import pauses
from sentient_assist.server.openai.pauses import take_marker
from sentient_assist.server.settings import Settings
from tests.support.agents import ScriptedAgent
from tests.support.server import running_server, uvicorn_in_thread
from tests.support.sse import iter_events, new_body

PROCESSOR = "settings-per-app"
SECRET_A = "the secret of app A, 16 bytes or more"
SECRET_B = "the secret of app B, 16 bytes or more"


def settings(**overrides: Any) -> Settings:
    # Explicit values for what these tests read: the test process's environment plays no part.
    defaults: dict[str, Any] = {"api_keys": "", "log_level": "warning", "resume_secret": SECRET_A}
    return load_settings(**{**defaults, **overrides})


def service(**overrides: Any) -> FastAPI:
    return create_app(settings(**overrides), agent=ScriptedAgent())


@contextmanager
def serving(app: Any, *, factory: bool = False) -> Iterator[str]:
    """`app` on a real uvicorn (the service's protocol, its lifespan) in a thread of this process; yields its URL."""
    with uvicorn_in_thread(app, factory=factory, lifespan="auto", log_level="warning") as (_, (host, port)):
        yield f"http://{host}:{port}"


def remote(url: str) -> Agent:
    return Agent(url + "/assist", processor_id=PROCESSOR)


def resumed_document(result: Any) -> dict[str, Any] | None:
    events = result.messages[-1].events
    return next((e["content"] for e in events if e["event_name"] == "RESUMED"), None)


async def assert_resumes(url: str, paused: Any) -> None:
    resumed = await remote(url).resume(paused, "Oslo")
    assert not resumed.errors
    assert resumed_document(resumed) == {
        "answer": "Oslo",
        "state": {"step": 1, "asked": "trip"},
        "question": "Which city?",
        "kind": "ask_user",
    }


async def assert_refuses(url: str, paused: Any) -> None:
    refused = await remote(url).run("Oslo", history=paused.messages)
    assert resumed_document(refused) is None  # the agent never ran
    (error,) = refused.errors
    assert error.code == 400 and error.details["refused"] == "resume"
    assert "not issued by this service" in error.message


def test_two_apps_keep_their_own_body_limits():
    body = new_body("ask:" + "x" * 3000)  # between the two limits
    with serving(service(max_body_bytes=1024)) as small, serving(service(max_body_bytes=1 << 20)) as large:
        assert httpx.post(small + "/assist", json=body, timeout=10).status_code == 413
        with httpx.stream("POST", large + "/assist", json=body, timeout=10) as response:
            assert response.status_code == 200
            names = [event.event for event in iter_events(response)]
        assert names[-2:] == ["ASK_USER", "done"]
        assert httpx.post(small + "/assist", json=new_body("ask:short"), timeout=10).status_code == 200


async def test_two_apps_keep_their_own_resume_secrets():
    with serving(service(resume_secret=SECRET_A)) as a, serving(service(resume_secret=SECRET_B)) as b:
        for issuer, other in ((a, b), (b, a)):
            paused = await remote(issuer).run("ask:trip")
            assert paused.interrupt is not None and paused.interrupt.token
            await assert_refuses(other, paused)
            await assert_resumes(issuer, paused)


def test_the_openai_face_verifies_with_its_apps_secret():
    def user(text: str) -> dict[str, str]:
        return {"role": "user", "content": text}

    def chat(url: str, messages: list[dict[str, str]]) -> httpx.Response:
        body = {"model": ScriptedAgent.name, "messages": messages}
        return httpx.post(url + "/v1/chat/completions", json=body, timeout=10)

    with serving(service(resume_secret=SECRET_A)) as a, serving(service(resume_secret=SECRET_B)) as b:
        for issuer, other in ((a, b), (b, a)):
            asked = chat(issuer, [user("ask:lunch")]).json()["choices"][0]["message"]["content"]
            assert take_marker(asked)[1] is not None
            answered = [user("ask:lunch"), {"role": "assistant", "content": asked}, user("Lima")]
            refused = chat(other, answered)
            assert refused.status_code == 400 and "not issued by this service" in refused.json()["error"]["message"]
            resumed = chat(issuer, answered)  # the agent's RESUMED document is not chat text: no error is the sign
            assert resumed.status_code == 200 and resumed.json()["object"] == "chat.completion"


async def test_add_routes_seals_pauses_with_the_secret_of_its_settings():
    mine = FastAPI()
    add_routes(mine, ScriptedAgent(), settings=settings(resume_secret=SECRET_B))
    with serving(mine) as own:
        paused = await remote(own).run("ask:trip")
        # Built after the pause was sealed, as a second replica of the same service would be.
        with serving(service(resume_secret=SECRET_B)) as replica, serving(service(resume_secret=SECRET_A)) as stranger:
            await assert_resumes(replica, paused)
            await assert_refuses(stranger, paused)
            await assert_resumes(own, await remote(replica).run("ask:trip"))
            await assert_refuses(own, await remote(stranger).run("ask:trip"))


class AsksThroughASubAgent(AbstractAgent):
    """Runs ScriptedAgent in-process (the facade) and sends on the token of the pause it made."""

    name = "asks-through-a-sub-agent"

    async def assist(self, session: Session, query: Query, response_handler: ResponseHandler) -> None:
        paused = await Agent(ScriptedAgent(), processor_id=PROCESSOR).run("ask:trip")
        assert paused.interrupt is not None
        await response_handler.respond("SUB_PAUSE", {"token": paused.interrupt.token})


def test_an_in_process_sub_agent_seals_with_the_secret_of_the_app_it_runs_in():
    app = create_app(settings(resume_secret=SECRET_B), agent=AsksThroughASubAgent())
    with serving(app) as url:
        with httpx.stream("POST", url + "/assist", json=new_body("go"), timeout=10) as response:
            data = [event.json for event in iter_events(response) if event.event == "SUB_PAUSE"]
    token = data[0]["content"]["token"]
    digest = pauses.prompts_digest(["ask:trip"])
    # Resumable by any replica of the service, not only by the process that ran the sub-agent.
    assert (
        pauses.sealer_for(SECRET_B.encode()).verify(token, digest=digest).source == ScriptedAgent.name
    )  # the agent that paused
    with pytest.raises(pauses.PauseRefused):
        pauses.PROCESS_SEALER.verify(token, digest=digest)


def answer_to_a_slow_header_block(url: str, junk: int, wait: float) -> int:
    """The status the server answers a header block with when its first `junk` bytes come at once
    and its end `wait` seconds later (unless the server answered by then)."""
    port = int(url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: test\r\nX-Junk: " + b"a" * junk)
        sock.settimeout(wait)
        try:
            head = sock.recv(64)  # refused already, in bytes or in time
        except TimeoutError:
            sock.settimeout(10)
            sock.sendall(b"\r\n\r\n")
            head = sock.recv(64)
    return int(head.split(b" ", 2)[1]) if head.startswith(b"HTTP/1.1 ") else 0


def test_two_servers_keep_the_header_limits_of_their_apps():
    small = service(max_header_bytes=4096, header_timeout=0.5)
    large: Callable[[], FastAPI] = lambda: service(max_header_bytes=65_536, header_timeout=5)  # noqa: E731
    # The second built by uvicorn from a factory, as --workers and --reload children build theirs.
    with serving(small) as strict, serving(large, factory=True) as lenient:
        for _ in range(2):  # and on every connection, not only the first
            assert answer_to_a_slow_header_block(strict, 16_000, wait=0.3) == 431
            assert answer_to_a_slow_header_block(lenient, 16_000, wait=0.3) == 200
        assert answer_to_a_slow_header_block(strict, 100, wait=1.5) == 408
        assert answer_to_a_slow_header_block(lenient, 100, wait=1.5) == 200


def test_uvicorns_own_command_line_with_workers_keeps_the_apps_header_limit():
    command = [
        sys.executable,
        "-m",
        "uvicorn",
        "--factory",
        "sentient_assist.server.app:create_app",
        "--http",
        "sentient_assist.server.protocol:BoundedHttpToolsProtocol",
        "--workers",
        "2",
    ]
    env = {"ASSIST_MAX_HEADER_BYTES": "4096", "ASSIST_AGENT": "tests.support.agents:ScriptedAgent"}
    with running_server(env, command=command) as server:
        for _ in range(4):  # connections to either worker
            assert answer_to_a_slow_header_block(server.url, 16_000, wait=1) == 431
            assert answer_to_a_slow_header_block(server.url, 2_000, wait=0.2) == 200
