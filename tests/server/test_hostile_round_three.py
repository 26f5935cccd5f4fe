"""Issue 40's hostile round, the parts done so far: a header block past the limit in one write,
and a key named the same however its Authorization header spells the scheme."""

from __future__ import annotations

import signal
import socket

import httpx

from tests.support.server import running_server

HEADER_LIMIT = 4096


def _exchange(url: str, request: bytes) -> bytes:
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        received = b""
        try:
            sock.sendall(request)  # one write: the whole block arrives in (at most) a few reads
            while chunk := sock.recv(65536):
                received += chunk
        except ConnectionResetError:
            pass  # refused and closed with the block unread: the kernel resets, the 431 may be lost
        return received


def test_a_header_block_past_the_limit_is_refused_when_it_arrives_in_one_write():
    with running_server({"ASSIST_AGENT": "echo", "ASSIST_MAX_HEADER_BYTES": str(HEADER_LIMIT)}) as server:
        padding = b"x-pad: " + b"a" * (25 * HEADER_LIMIT) + b"\r\n"  # 100 KB, as the attack sent
        refused = 'assist_http_requests_total{status="431"}'
        before = server.metric(refused)
        answer = _exchange(server.url, b"GET /healthz HTTP/1.1\r\nHost: x\r\n" + padding + b"\r\n")
        # Refused, never served: its 431, unless the reset of a close with bytes unread overtook it.
        assert answer.startswith(b"HTTP/1.1 431") or answer == b"", answer[:80]
        assert server.metric(refused) == before + 1
        within = b"x-pad: " + b"a" * (HEADER_LIMIT // 2) + b"\r\n"
        fine = _exchange(server.url, b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" + within + b"\r\n")
        assert fine.startswith(b"HTTP/1.1 200"), fine[:80]


def test_a_key_owns_its_tasks_however_the_scheme_is_written():
    env = {"ASSIST_AGENT": "echo", "ASSIST_FACES": "assist,a2a", "ASSIST_API_KEYS": "k-one"}
    message = {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}
    sending = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
    with running_server(env) as server:
        sent = httpx.post(
            server.url + "/a2a", json=sending, headers={"A2A-Version": "1.0", "Authorization": "bearer k-one"}
        )
        task_id = sent.json()["result"]["task"]["id"]
        getting = {"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": task_id}}
        got = httpx.post(
            server.url + "/a2a", json=getting, headers={"A2A-Version": "1.0", "Authorization": "Bearer  k-one"}
        )
    assert got.json()["result"]["id"] == task_id, got.text


def test_a_store_that_does_not_answer_is_named_without_its_address():
    from tests.support.redis_server import running_redis

    with running_redis() as redis:
        env = {"ASSIST_AGENT": "echo", "ASSIST_FACES": "assist,a2a", "ASSIST_REDIS_URL": redis.url}
        getting = {"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": "no-such-task"}}
        with running_server(env) as server:
            redis.process.send_signal(signal.SIGSTOP)  # paused: every command times out
            try:
                got = httpx.post(server.url + "/a2a", json=getting, headers={"A2A-Version": "1.0"}, timeout=30)
            finally:
                redis.process.send_signal(signal.SIGCONT)
            log = server.log()
    error = got.json()["error"]
    assert error["message"] == "The task store (shared by the replicas) did not answer; try again shortly."
    assert "127.0.0.1" not in got.text and str(redis.port) not in got.text
    assert "A2A task store: get failed" in log


def test_an_a2a_message_of_many_values_is_refused_before_the_sdk_parses_it_naming_where():
    env = {"ASSIST_AGENT": "echo", "ASSIST_FACES": "assist,a2a"}
    headers = {"A2A-Version": "1.0"}

    def sending(**message: object) -> dict[str, object]:
        full = {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hi"}], **message}
        return {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": full}}

    with running_server(env) as server:
        # The attack's 1 MB of `{"a": [{}, {}, ...]}` (10 s of the SDK's CPU on the event loop before).
        many = httpx.post(server.url + "/a2a", json=sending(metadata={"a": [{}] * 250_000}), headers=headers)
        assert many.status_code == 400, many.text
        error = many.json()["error"]
        assert error["message"].startswith("params.message.metadata.a: the request holds more than 2000 JSON values")
        deep: object = "bottom"
        for _ in range(40):
            deep = {"d": deep}
        nested = httpx.post(server.url + "/a2a", json=sending(metadata=deep), headers=headers)
        assert nested.status_code == 400 and "nested more than 20 levels deep" in nested.json()["error"]["message"]
        assert "proto" not in nested.text.lower()
        fine = httpx.post(server.url + "/a2a", json=sending(metadata={"a": [{}] * 100}), headers=headers)
        assert fine.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED", fine.text


def test_the_agent_card_names_the_service_never_the_requests_host():
    with running_server({"ASSIST_AGENT": "echo", "ASSIST_FACES": "assist,a2a"}) as server:
        card = httpx.get(server.url + "/.well-known/agent-card.json", headers={"Host": "evil.example:9999"})
    assert card.headers["cache-control"] == "public, max-age=300"
    assert card.json()["supportedInterfaces"][0]["url"] == server.url + "/a2a"
    assert "evil.example" not in card.text


def test_a2a_agent_sends_its_key_only_to_the_origin_it_was_given():
    import asyncio

    from a2a.server.request_handlers.response_helpers import agent_card_to_dict
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    from sentient_assist import A2AAgent, Agent
    from sentient_assist.agents.echo import EchoAgent
    from sentient_assist.server.a2a.card import agent_card
    from tests.support.server import uvicorn_in_thread

    seen: dict[str, list[str | None]] = {"card": [], "elsewhere": []}

    async def elsewhere(request: Request) -> JSONResponse:
        seen["elsewhere"].append(request.headers.get("authorization"))
        return JSONResponse({"jsonrpc": "2.0", "id": None, "error": {"code": -32603, "message": "no"}})

    other = Starlette(routes=[Route("/a2a", elsewhere, methods=["POST"])])
    with uvicorn_in_thread(other) as (_, (other_host, other_port)):
        card = agent_card_to_dict(agent_card(EchoAgent(), f"http://{other_host}:{other_port}/a2a", with_keys=True))

        async def the_card(request: Request) -> JSONResponse:
            seen["card"].append(request.headers.get("authorization"))
            return JSONResponse(card)

        cards = Starlette(routes=[Route("/.well-known/agent-card.json", the_card)])
        with uvicorn_in_thread(cards) as (_, (host, port)):
            remote = A2AAgent(f"http://{host}:{port}", api_key="the-key")
            asyncio.run(Agent(remote).run("hi"))
    assert seen["card"] == ["Bearer the-key"]
    assert seen["elsewhere"] and all(header is None for header in seen["elsewhere"])


def test_no_key_holds_more_than_its_share_of_the_places_with_a_connection_or_without():
    keys = "key-a,key-b"
    env = {
        "ASSIST_AGENT": "tests.support.agents:ScriptedAgent",
        "ASSIST_FACES": "assist,a2a",
        "ASSIST_API_KEYS": keys,
        "ASSIST_MAX_STREAMS": "4",
    }
    message = {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "silent:30"}]}
    detached = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {"message": message, "configuration": {"returnImmediately": True}},
    }
    query = {"query": {"id": "01JDQ4Z8M7T3V5X9A2B4C6D8EF", "prompt": "silent:0"}}

    def as_key(key: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {key}", "A2A-Version": "1.0"}

    with running_server(env) as server:
        # Key A's tasks go on with no connection, each holding a place: two are its share of four.
        for _ in range(2):
            sent = httpx.post(server.url + "/a2a", json=detached, headers=as_key("key-a"))
            assert sent.status_code == 200 and "result" in sent.json(), sent.text
        third = httpx.post(server.url + "/assist", json=query, headers=as_key("key-a"))
        assert third.status_code == 503 and "ASSIST_MAX_STREAMS_PER_KEY" in third.json()["detail"]
        assert third.headers["retry-after"] == "1"
        other = httpx.post(server.url + "/assist", json=query, headers=as_key("key-b"))
        assert other.status_code == 200 and "spoke at last" in other.text
