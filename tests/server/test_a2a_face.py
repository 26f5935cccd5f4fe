"""/a2a and the agent card: the served agent as an A2A agent (docs/a2a.md), against a real uvicorn
serving tests/server/a2a_agents.py's A2AFaceAgent. The clients are a2a-sdk's own (A2A 1.0), raw
HTTP for what a client could send (0.3's method names, bad bodies, no key), two replicas sharing
a real redis-server, and @a2a-js/sdk's client run by node, a client nobody here wrote."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client import Client, ClientConfig, create_client
from a2a.client.card_resolver import parse_agent_card
from a2a.helpers import get_artifact_text, get_data_parts, get_message_text, new_text_message
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetTaskRequest,
    Role,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    TaskState,
    TaskStatus,
)
from a2a.utils.errors import A2AError
from google.protobuf.json_format import MessageToDict

from sentient_assist.runtime.run import AGENT_FAILED_MESSAGE, TIMEOUT_MESSAGE
from tests.support.agents import SECRET
from tests.support.files import wait_for_file
from tests.support.redis_server import RunningRedis, running_redis
from tests.support.request import post
from tests.support.server import ALL_FACES, ROOT, RunningServer, Servers, running_server

KEY = "test-key-for-the-a2a-face"
OTHER_KEY = "another-key-for-the-a2a-face"
AGENT = {
    "ASSIST_AGENT": "tests.server.a2a_agents:A2AFaceAgent",
    "ASSIST_LOG_LEVEL": "warning",
    "ASSIST_MAX_BODY_BYTES": "16384",
    "ASSIST_REQUEST_TIMEOUT": "4",
    **ALL_FACES,
}
V1 = {"A2A-Version": "1.0"}
JS_CLIENT = ROOT / "tests" / "a2a_client"

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def server(serve: Servers) -> RunningServer:
    return serve(AGENT)


@pytest.fixture(scope="module")
def keyed_server(serve: Servers) -> RunningServer:
    return serve({**AGENT, "ASSIST_API_KEYS": f"{KEY},{OTHER_KEY}", "ASSIST_PUBLIC_URL": "https://agents.example.com"})


@asynccontextmanager
async def a2a_client(url: str, *, key: str | None = None, streaming: bool = True) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with httpx.AsyncClient(timeout=30, headers=headers) as http:
        client = await create_client(url, ClientConfig(httpx_client=http, streaming=streaming))
        yield client


def user_message(text: str, *, task: Task | None = None) -> SendMessageRequest:
    message = new_text_message(text, role=Role.ROLE_USER)
    if task is not None:
        message.task_id, message.context_id = task.id, task.context_id
    return SendMessageRequest(message=message)


async def responses(client: Client, request: SendMessageRequest) -> list[StreamResponse]:
    return [response async for response in client.send_message(request)]


def artifacts_by_name(task: Task) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for artifact in task.artifacts:
        data = get_data_parts(artifact.parts)
        out[artifact.name] = data[0] if data else get_artifact_text(artifact, "")
    return out


def final_task(items: list[StreamResponse]) -> tuple[str, str]:
    """The task id and context id the stream's events name."""
    for item in items:
        if item.HasField("task"):
            return item.task.id, item.task.context_id
        if item.HasField("status_update"):
            return item.status_update.task_id, item.status_update.context_id
    raise AssertionError("no task in the stream")


def last_status(items: list[StreamResponse]) -> TaskStatus:
    """The task's status as the last of a stream's items has it."""
    last = items[-1]
    return last.status_update.status if last.HasField("status_update") else last.task.status


async def answering(stream: AsyncIterator[StreamResponse]) -> str:
    """Read `stream` up to its first artifact update (the agent is answering): its task's id."""
    async for item in stream:
        if item.HasField("artifact_update"):
            return item.artifact_update.task_id
    raise AssertionError("the stream ended before the agent answered")


def test_the_card_names_the_agent_its_skill_and_its_json_rpc_url(server: RunningServer) -> None:
    card = httpx.get(server.url + "/.well-known/agent-card.json").json()
    assert card["name"] == "a2a-agent"
    assert card["description"] == "Test agent for /a2a: its prompt picks a behaviour."
    assert [skill["id"] for skill in card["skills"]] == ["a2a-agent"]
    assert card["supportedInterfaces"] == [
        {"url": server.url + "/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
    ]
    assert card["capabilities"]["streaming"] is True
    assert "securitySchemes" not in card  # no keys: none


def test_with_keys_the_card_names_the_bearer_scheme_and_the_public_url(keyed_server: RunningServer) -> None:
    card = httpx.get(keyed_server.url + "/.well-known/agent-card.json").json()  # public, as A2A has it
    assert card["supportedInterfaces"][0]["url"] == "https://agents.example.com/a2a"
    assert card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"] == "Bearer"
    assert card["securityRequirements"] == [{"schemes": {"bearer": {}}}]


async def test_send_answers_with_a_completed_task_holding_every_event_as_an_artifact(server: RunningServer) -> None:
    async with a2a_client(server.url, streaming=False) as client:
        [item] = await responses(client, user_message("answer"))
    task = item.task
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    found = artifacts_by_name(task)
    assert found["FINAL_RESPONSE"] == "Forty-two."
    assert found["THINKING"] == "Let me think."
    assert found["TOOL_CALL"] == {"id": "call-1", "name": "lookup", "arguments": {"q": "answer"}}
    assert found["SOURCES"]["results"][0]["url"] == "https://example.com"
    assert [get_message_text(message) for message in task.history] == ["answer"]


async def test_a_stream_is_the_task_then_status_and_artifact_updates_in_order(server: RunningServer) -> None:
    async with a2a_client(server.url) as client:
        items = await responses(client, user_message("slowly:3"))
    kinds = [item.WhichOneof("payload") for item in items]
    assert kinds[0] == "task" and items[0].task.status.state == TaskState.TASK_STATE_SUBMITTED
    assert items[1].status_update.status.state == TaskState.TASK_STATE_WORKING
    assert items[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
    chunks = [item.artifact_update for item in items if item.HasField("artifact_update")]
    assert "".join(get_artifact_text(chunk.artifact, "") for chunk in chunks) == "word0 word1 word2 "
    assert len({chunk.artifact.artifact_id for chunk in chunks}) == 1  # one stream, one artifact
    assert chunks[0].append is False and all(chunk.append for chunk in chunks[1:])
    assert chunks[-1].last_chunk and not any(chunk.last_chunk for chunk in chunks[:-1])
    task_id, _ = final_task(items)
    async with a2a_client(server.url) as client:
        task = await client.get_task(GetTaskRequest(id=task_id))
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert artifacts_by_name(task)["FINAL_RESPONSE"] == "word0 word1 word2 "


async def test_a_pause_is_input_required_and_the_next_message_resumes_it(server: RunningServer) -> None:
    async with a2a_client(server.url) as client:
        items = await responses(client, user_message("ask:trip"))
        paused = items[-1].status_update.status
        assert paused.state == TaskState.TASK_STATE_INPUT_REQUIRED
        assert get_message_text(paused.message).startswith("Which city?")
        assert get_data_parts(paused.message.parts)[0]["choices"] == ["Oslo", "Lima"]
        task_id, _ = final_task(items)
        task = await client.get_task(GetTaskRequest(id=task_id))
        assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        resumed = await responses(client, user_message("Lima", task=task))
        assert resumed[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
        task = await client.get_task(GetTaskRequest(id=task_id))
        assert any(get_artifact_text(a, "") == "You chose Lima (step 1)." for a in task.artifacts)
        assert [get_message_text(m) for m in task.history if m.role == Role.ROLE_USER] == ["ask:trip", "Lima"]
        # A finished task takes no more messages: the SDK says so, and nothing runs.
        with pytest.raises(A2AError, match="terminal state"):
            await responses(client, user_message("Oslo", task=task))


async def test_cancel_stops_the_run_and_cancels_the_task(server: RunningServer) -> None:
    async with a2a_client(server.url) as client:
        stream = client.send_message(user_message("slowly:100"))
        task_id = ""
        task_id = await answering(stream)
        async with a2a_client(server.url) as other:
            canceled = await other.cancel_task(CancelTaskRequest(id=task_id))
        assert canceled.status.state == TaskState.TASK_STATE_CANCELED
        await stream.aclose()
        task = await client.get_task(GetTaskRequest(id=task_id))
    assert task.status.state == TaskState.TASK_STATE_CANCELED
    words = get_artifact_text(task.artifacts[0], "").split()
    assert 1 <= len(words) < 100


async def test_a_client_that_leaves_a_stream_leaves_its_task_running_to_its_end(server: RunningServer) -> None:
    async with a2a_client(server.url) as client:
        stream = client.send_message(user_message("slowly:5"))
        task_id = await answering(stream)
        await stream.aclose()  # the connection closes with the stream
        for _ in range(100):  # bounded: the run ends in about a second
            task = await client.get_task(GetTaskRequest(id=task_id))
            if task.status.state != TaskState.TASK_STATE_WORKING:
                break
            await asyncio.sleep(0.1)
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert get_artifact_text(task.artifacts[0], "") == "word0 word1 word2 word3 word4 "


async def test_an_error_with_no_answer_fails_the_task_with_its_message(server: RunningServer) -> None:
    async with a2a_client(server.url, streaming=False) as client:
        [item] = await responses(client, user_message("error"))
    status = item.task.status
    assert status.state == TaskState.TASK_STATE_FAILED
    assert get_message_text(status.message).startswith("the lookup service is down")
    assert artifacts_by_name(item.task)["error"]["error_code"] == 502


async def test_an_agent_that_raises_fails_its_task_without_a_traceback(server: RunningServer) -> None:
    async with a2a_client(server.url, streaming=False) as client:
        [item] = await responses(client, user_message("raise"))
    task = item.task
    assert task.status.state == TaskState.TASK_STATE_FAILED  # its partial answer does not make it a success
    assert get_message_text(task.status.message).startswith(AGENT_FAILED_MESSAGE)
    error = artifacts_by_name(task)["error"]
    assert error["error_code"] == 500 and error["details"]["error_type"] == "RuntimeError"
    assert SECRET not in json.dumps(MessageToDict(task)) and "Traceback" not in json.dumps(MessageToDict(task))


def rpc(method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 7, "method": method, "params": params}


def test_0_3_clients_use_their_own_method_names(server: RunningServer) -> None:
    message = {"kind": "message", "messageId": "m-1", "role": "user", "parts": [{"kind": "text", "text": "answer"}]}
    answer = post(server, "/a2a", rpc("message/send", {"message": message})).json()
    assert answer["result"]["kind"] == "task"
    assert answer["result"]["status"]["state"] == "completed"
    got = post(server, "/a2a", rpc("tasks/get", {"id": answer["result"]["id"]})).json()
    assert got["result"]["status"]["state"] == "completed"


def test_bad_requests_get_json_rpc_errors_that_say_why(server: RunningServer) -> None:
    empty = {"message": {"messageId": "m-2", "role": "ROLE_USER", "parts": []}}
    refused = post(server, "/a2a", rpc("SendMessage", empty), headers=V1).json()
    state = refused.get("result", {}).get("task", {}).get("status", {})
    assert "error" in refused or state.get("state") == "TASK_STATE_REJECTED"
    unknown = post(server, "/a2a", rpc("NoSuchMethod", {}), headers=V1).json()
    assert unknown["error"]["code"] == -32601
    not_json = post(server, "/a2a", b"{not json", headers=V1)
    assert not_json.json()["error"]["code"] == -32700
    missing = post(server, "/a2a", rpc("GetTask", {"id": "no-such-task"}), headers=V1).json()
    assert missing["error"]["code"] == -32001  # TaskNotFoundError
    too_large = post(server, "/a2a", b"x" * 20_000)
    assert too_large.status_code == 413
    assert too_large.json()["error"]["message"].startswith("the request body is larger than")


def test_a_message_with_no_text_is_rejected_naming_the_field(server: RunningServer) -> None:
    message = {"messageId": "m-3", "role": "ROLE_USER", "parts": [{"url": "https://example.com/a.png"}]}
    answer = post(server, "/a2a", rpc("SendMessage", {"message": message}), headers=V1).json()
    task = answer["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_REJECTED"
    assert "message.parts" in task["status"]["message"]["parts"][0]["text"]


async def test_with_keys_a_call_needs_one_and_sees_its_own_tasks_alone(keyed_server: RunningServer) -> None:
    url = keyed_server.url + "/a2a"
    async with httpx.AsyncClient(timeout=30) as http:
        refused = await http.post(url, json=rpc("GetTask", {"id": "x"}), headers={"A2A-Version": "1.0"})
        assert refused.status_code == 401
        assert refused.json()["error"]["code"] == -32600 and refused.json()["id"] is None
        wrong = await http.post(url, json=rpc("GetTask", {"id": "x"}), headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401
        card = (await http.get(keyed_server.url + "/.well-known/agent-card.json")).json()
    card["supportedInterfaces"][0]["url"] = url  # the card names the public URL; the test calls it here
    async with httpx.AsyncClient(timeout=30, headers={"Authorization": f"Bearer {KEY}"}) as http:
        client = await create_client(parse_agent_card(card), ClientConfig(httpx_client=http, streaming=False))
        [item] = await responses(client, user_message("answer"))
        assert item.task.status.state == TaskState.TASK_STATE_COMPLETED
        task = await client.get_task(GetTaskRequest(id=item.task.id))
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
    # Another key's client does not find it: each key's tasks are its own.
    other = {"A2A-Version": "1.0", "Authorization": f"Bearer {OTHER_KEY}"}
    async with httpx.AsyncClient(timeout=30, headers=other) as http:
        hidden = (await http.post(url, json=rpc("GetTask", {"id": item.task.id}))).json()
        canceled = (await http.post(url, json=rpc("CancelTask", {"id": item.task.id}))).json()
    assert hidden["error"]["code"] == -32001 and canceled["error"]["code"] == -32001


@pytest.fixture(scope="module")
def redis() -> Iterator[RunningRedis]:
    with running_redis() as running:
        yield running


@pytest.fixture(scope="module")
def replicas(redis: RunningRedis) -> Iterator[tuple[RunningServer, RunningServer]]:
    shared = {**AGENT, "ASSIST_REDIS_URL": redis.url, "ASSIST_RESUME_SECRET": "one-secret-for-every-replica"}
    with running_server(shared) as first, running_server(shared) as second:
        yield first, second


async def test_any_replica_answers_a_tasks_next_message_get_and_cancel(
    replicas: tuple[RunningServer, RunningServer], redis: RunningRedis
) -> None:
    first, second = replicas
    async with a2a_client(first.url) as on_first, a2a_client(second.url) as on_second:
        items = await responses(on_first, user_message("ask:replicas"))
        task_id, _ = final_task(items)
        assert redis.command("EXISTS", f"sentient_assist:a2a:task::{task_id}") == "1"
        task = await on_second.get_task(GetTaskRequest(id=task_id))
        assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        resumed = await responses(on_second, user_message("Oslo", task=task))  # the pause answered on the other
        assert resumed[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
        task = await on_first.get_task(GetTaskRequest(id=task_id))
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
        assert any(get_artifact_text(a, "") == "You chose Oslo (step 1)." for a in task.artifacts)
        # The context's next task, on the first again: its conversation read from Redis.
        then = user_message("echo-history:r")
        then.message.context_id = task.context_id
        items = await responses(on_first, then)
        echoed = [get_artifact_text(i.artifact_update.artifact, "") for i in items if i.HasField("artifact_update")]
        assert echoed == ["ask:replicas | Oslo | echo-history:r"]


def test_the_a2a_js_client_sends_streams_and_cancels(server: RunningServer) -> None:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed (Debian: apt-get install nodejs npm)")
    assert (JS_CLIENT / "node_modules" / "@a2a-js" / "sdk").is_dir(), "run: npm ci --prefix tests/a2a_client"
    completed = subprocess.run(
        [node, str(JS_CLIENT / "client.mjs"), server.url],
        capture_output=True,
        text=True,
        timeout=90,
        env={**os.environ, "NODE_NO_WARNINGS": "1"},
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    report = json.loads(completed.stdout.strip().splitlines()[-1])
    assert report["card"] == "a2a-agent"
    assert report["sent"] == {"state": "completed", "answer": "Forty-two."}
    assert report["streamed"]["answer"] == "word0 word1 word2 "
    assert report["streamed"]["kinds"][0] == "task" and report["streamed"]["last"] == "completed"
    # It breaks out of the stream, then cancels: the task outlived the stream, as A2A has it.
    assert report["canceled"] == "canceled" and report["after"] == "canceled"


async def test_a_task_canceled_on_one_replica_stops_on_the_one_that_runs_it(
    replicas: tuple[RunningServer, RunningServer],
) -> None:
    first, second = replicas
    async with a2a_client(first.url) as on_first, a2a_client(second.url) as on_second:
        stream = on_first.send_message(user_message("slowly:50"))
        task_id = await answering(stream)
        canceled = await on_second.cancel_task(CancelTaskRequest(id=task_id))
        assert canceled.status.state == TaskState.TASK_STATE_CANCELED
        rest = [item async for item in stream]  # the running replica's next save is refused: it stops
        last = rest[-1]
        assert last.HasField("task") and last.task.status.state == TaskState.TASK_STATE_CANCELED
        task = await on_first.get_task(GetTaskRequest(id=task_id))
    assert task.status.state == TaskState.TASK_STATE_CANCELED
    assert len(get_artifact_text(task.artifacts[0], "").split()) < 50


def streamed_text(items: list[StreamResponse]) -> str:
    """The answer the items carry: the task's FINAL_RESPONSE artifact as it stood, then each
    artifact update's text after it (an update appends, or replaces the artifact)."""
    text = ""
    for item in items:
        if item.HasField("task"):
            text = artifacts_by_name(item.task).get("FINAL_RESPONSE", "")
        elif item.HasField("artifact_update") and item.artifact_update.artifact.name == "FINAL_RESPONSE":
            update = item.artifact_update
            chunk = get_artifact_text(update.artifact, "")
            text = text + chunk if update.append else chunk
    return text


async def test_subscribe_on_another_replica_follows_the_task_live_to_its_end(
    replicas: tuple[RunningServer, RunningServer], redis: RunningRedis
) -> None:
    first, second = replicas
    async with a2a_client(first.url) as on_first, a2a_client(second.url) as on_second:
        stream = on_first.send_message(user_message("slowly:8"))
        task_id = await answering(stream)
        # The second replica does not run the task: it serves it from Redis, then its events as they come.
        followed = [item async for item in on_second.subscribe(SubscribeToTaskRequest(id=task_id))]
        rest = [item async for item in stream]
    assert followed[0].HasField("task")
    assert followed[0].task.status.state == TaskState.TASK_STATE_WORKING
    assert sum(item.HasField("artifact_update") for item in followed) >= 2  # live updates, not only the task
    last = followed[-1]
    assert last.HasField("status_update") and last.status_update.status.state == TaskState.TASK_STATE_COMPLETED
    answer = "".join(f"word{index} " for index in range(8))
    assert streamed_text(followed) == answer
    assert not any(item.HasField("task") and item.task.status.state == TaskState.TASK_STATE_FAILED for item in rest)
    # The task's events are kept only while it sends: a minute at most.
    assert 0 < int(redis.command("PTTL", f"sentient_assist:a2a:events:{task_id}")) <= 60_000


async def test_a_follower_on_another_replica_whose_redis_dies_gets_an_error_not_a_hang() -> None:
    with running_redis() as dying:
        shared = {**AGENT, "ASSIST_REDIS_URL": dying.url, "ASSIST_RESUME_SECRET": "one-secret-for-every-replica"}
        with running_server(shared) as first, running_server(shared) as second:
            async with a2a_client(first.url) as on_first, a2a_client(second.url) as on_second:
                stream = on_first.send_message(user_message("slowly:15"))
                task_id = await answering(stream)
                followed = on_second.subscribe(SubscribeToTaskRequest(id=task_id))
                assert (await anext(followed)).HasField("task")
                dying.kill()
                with pytest.raises(A2AError, match="could not be read from the shared store"):
                    await asyncio.wait_for(anext(followed), 3)  # well before the 4 s time limit


async def test_a_contexts_earlier_tasks_are_the_conversation_of_its_next(server: RunningServer) -> None:
    async with a2a_client(server.url, streaming=False) as client:
        [first] = await responses(client, user_message("answer"))
        context_id = first.task.context_id
        then = user_message("echo-history:two")
        then.message.context_id = context_id  # a new task in the same context, as A2A clients continue a chat
        [second] = await responses(client, then)
        assert artifacts_by_name(second.task)["FINAL_RESPONSE"] == "answer | echo-history:two"
        # A pause in that context still resumes: its conversation is the one it was asked in.
        ask = user_message("ask:again")
        ask.message.context_id = context_id
        [paused] = await responses(client, ask)
        assert paused.task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        [resumed] = await responses(client, user_message("Oslo", task=paused.task))
    assert resumed.task.status.state == TaskState.TASK_STATE_COMPLETED
    assert artifacts_by_name(resumed.task)["FINAL_RESPONSE"] == "You chose Oslo (step 1)."


def test_the_card_answers_head_as_get_does(server: RunningServer) -> None:
    head = httpx.head(server.url + "/.well-known/agent-card.json")
    assert head.status_code == 200 and head.content == b""
    assert head.headers["content-type"] == "application/json"


async def test_a_run_past_the_time_limit_fails_its_task_and_the_agent_is_cancelled(
    server: RunningServer, tmp_path: Path
) -> None:
    cancelled = tmp_path / "cancelled"
    async with a2a_client(server.url, streaming=False) as client:
        [item] = await responses(client, user_message(f"hang:{cancelled}"))
    status = item.task.status
    assert status.state == TaskState.TASK_STATE_FAILED
    assert get_message_text(status.message).startswith(TIMEOUT_MESSAGE)
    assert artifacts_by_name(item.task)["error"]["error_code"] == 504
    assert wait_for_file(cancelled, 5) is not None  # the agent's task was cancelled


async def test_a_tasks_conversation_counts_in_max_history_bytes_total_while_its_run_holds_it() -> None:
    with running_server({**AGENT, "ASSIST_MAX_HISTORY_BYTES_TOTAL": "1024"}) as small:
        async with a2a_client(small.url) as client:
            [first] = [
                i for i in await responses(client, user_message("echo-history:" + "y" * 300)) if i.HasField("task")
            ]
            context_id = first.task.context_id

            def in_context(text: str) -> SendMessageRequest:
                request = user_message(text)
                request.message.context_id = context_id
                return request

            # A run whose conversation holds about 640 bytes; a second one at once would pass 1,024.
            holding = client.send_message(in_context("slowly:10"))
            await answering(holding)
            refused = await responses(client, in_context("answer"))
            status = last_status(refused)
            assert status.state == TaskState.TASK_STATE_REJECTED
            reason = get_message_text(status.message)
            assert "ASSIST_MAX_HISTORY_BYTES_TOTAL (1024 bytes)" in reason and "retry shortly" in reason
            rest = [item async for item in holding]
            assert rest[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
            # Its run ended, its conversation is let go (once nothing holds it): the same message runs.
            deadline = time.monotonic() + 10
            while True:
                again = await responses(client, in_context("answer"))
                state = last_status(again).state
                if state == TaskState.TASK_STATE_COMPLETED or time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.2)
            assert state == TaskState.TASK_STATE_COMPLETED


async def test_every_call_and_every_run_counts_under_max_streams() -> None:
    with running_server({**AGENT, "ASSIST_MAX_STREAMS": "1"}) as one:
        url, headers = one.url + "/a2a", {"A2A-Version": "1.0"}
        async with a2a_client(one.url) as client:
            stream = client.send_message(user_message("slowly:10"))
            task_id = await answering(stream)
            async with httpx.AsyncClient(timeout=30) as http:
                refused = await http.post(url, json=rpc("GetTask", {"id": task_id}), headers=headers)
                assert refused.status_code == 503 and refused.headers["retry-after"] == "1"
                assert "limit of 1 concurrent streams" in refused.json()["error"]["message"]
                await stream.aclose()  # its run goes on, and holds the place till it ends
                still = await http.post(url, json=rpc("GetTask", {"id": task_id}), headers=headers)
                assert still.status_code == 503
                for _ in range(100):  # bounded: the run ends in two seconds
                    answer = await http.post(url, json=rpc("GetTask", {"id": task_id}), headers=headers)
                    if answer.status_code == 200:
                        break
                    await asyncio.sleep(0.1)
        assert answer.json()["result"]["status"]["state"] == "TASK_STATE_COMPLETED"


async def test_a_conversation_past_the_body_limit_is_refused_naming_it(server: RunningServer) -> None:
    async with a2a_client(server.url, streaming=False) as client:
        [first] = await responses(client, user_message("echo-history:" + "x" * 6000))
        context_id = first.task.context_id
        for _ in range(2):  # each message is within the body limit; the conversation grows past it
            then = user_message("echo-history:" + "y" * 6000)
            then.message.context_id = context_id
            [last] = await responses(client, then)
    assert last.task.status.state == TaskState.TASK_STATE_REJECTED
    refusal = get_message_text(last.task.status.message)
    assert refusal.startswith("message.contextId:") and "ASSIST_MAX_BODY_BYTES (16384)" in refusal


async def test_without_keys_no_client_lists_the_tasks_of_another(replicas: tuple[RunningServer, RunningServer]) -> None:
    # Without keys every client is one owner: a list would hand one client another's prompts.
    first, second = replicas
    async with a2a_client(first.url, streaming=False) as client:
        [item] = await responses(client, user_message("answer"))
    async with httpx.AsyncClient(timeout=30, headers=V1) as http:
        for replica in replicas:
            listing = rpc("ListTasks", {"contextId": item.task.context_id, "includeArtifacts": True})
            refused = (await http.post(replica.url + "/a2a", json=listing)).json()
            assert refused["error"]["code"] == -32004 and "ASSIST_API_KEYS" in refused["error"]["message"]
        # The task's own id, which only its client knows, still finds it on any replica.
        got = (await http.post(second.url + "/a2a", json=rpc("GetTask", {"id": item.task.id}))).json()
    assert got["result"]["status"]["state"] == "TASK_STATE_COMPLETED"


async def test_with_keys_a_client_lists_its_own_tasks_alone(keyed_server: RunningServer) -> None:
    url = keyed_server.url + "/a2a"
    message = {"messageId": "m-listed", "role": "ROLE_USER", "parts": [{"text": "answer"}]}
    mine, theirs = ({**V1, "Authorization": f"Bearer {key}"} for key in (KEY, OTHER_KEY))
    async with httpx.AsyncClient(timeout=30) as http:
        task = (await http.post(url, json=rpc("SendMessage", {"message": message}), headers=mine)).json()
        context_id = task["result"]["task"]["contextId"]
        listing = rpc("ListTasks", {"contextId": context_id})
        listed = (await http.post(url, json=listing, headers=mine)).json()["result"]
        hidden = (await http.post(url, json=listing, headers=theirs)).json()["result"]
    assert [listed_task["id"] for listed_task in listed["tasks"]] == [task["result"]["task"]["id"]]
    assert hidden.get("tasks", []) == []
