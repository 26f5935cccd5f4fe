"""POST /mcp: the served agent as an MCP server (docs/mcp.md, "The agent as an MCP server"),
against a real uvicorn serving tests/server/mcp_face_agents.py's MCPFaceAgent. The clients are
the mcp SDK's own (over both eras of the protocol: the 2025 handshake, and 2026-07-28's
self-contained requests), raw HTTP for what a client could send, and the MCP Inspector's CLI
from npm, a client nobody here wrote."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2  # the mcp SDK's HTTP client
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from sentient_assist import add_routes
from sentient_assist.runtime.run import AGENT_FAILED_MESSAGE, TIMEOUT_MESSAGE
from sentient_assist.server.settings import load_settings
from tests.server.mcp_face_agents import MCPFaceAgent
from tests.support.agents import SECRET
from tests.support.files import wait_for_file
from tests.support.request import post, posting
from tests.support.server import ALL_FACES, ROOT, RunningServer, Servers, clean_env, running_server
from tests.support.sse import events_of, iter_events
from tests.support.waiting import wait_until

KEY = "test-key-for-the-mcp-face"
TOOL = "mcp-agent"
TIME_LIMIT = 2.0
MAX_BODY = 16_384
AGENT = {"ASSIST_AGENT": "tests.server.mcp_face_agents:MCPFaceAgent", "ASSIST_LOG_LEVEL": "warning", **ALL_FACES}
# The SDK's eras: "legacy" is the 2025 handshake (initialize first), "auto" finds 2026-07-28.
MODES = ["legacy", "auto"]
HEADERS = {
    "Accept": "application/json, text/event-stream",
    "Content-Type": "application/json",
    "MCP-Protocol-Version": "2025-06-18",
}
INSPECTOR = ROOT / "tests" / "mcp_inspector"
KEYED: dict[str, Any] = {"key": KEY, "headers": HEADERS}  # a request of a client with the key

pytestmark = pytest.mark.timeout(90)


@pytest.fixture(scope="module")
def server(serve: Servers) -> RunningServer:
    env = {
        **AGENT,
        "ASSIST_API_KEYS": KEY,
        "ASSIST_REQUEST_TIMEOUT": str(TIME_LIMIT),
        "ASSIST_MAX_BODY_BYTES": str(MAX_BODY),
    }
    return serve(env)


@pytest.fixture(scope="module")
def one_stream_server(serve: Servers) -> RunningServer:
    """No keys, one stream at a time."""
    return serve({**AGENT, "ASSIST_MAX_STREAMS": "1", "ASSIST_REQUEST_TIMEOUT": "10"})


@asynccontextmanager
async def connected(server: RunningServer, mode: str, key: str | None = KEY) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=60)) as http:
        async with Client(streamable_http_client(server.url + "/mcp", http_client=http), mode=mode) as client:
            yield client


def call_message(arguments: dict[str, Any], request_id: int = 1, meta: dict[str, Any] | None = None) -> dict:
    params: dict[str, Any] = {"name": TOOL, "arguments": arguments}
    if meta is not None:
        params["_meta"] = meta
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


LIST_MESSAGE = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}


def messages_of(response: httpx.Response) -> list[dict]:
    """The JSON-RPC messages of an answer: its JSON body, or its SSE stream's events."""
    if response.headers["content-type"].startswith("application/json"):
        return [response.json()]
    return [event.json for event in events_of(response.text) if event.data]


def text_of(result: Any) -> str:
    return "\n".join(block.text for block in result.content)


@pytest.mark.parametrize("mode", MODES)
async def test_tools_list_is_the_agent_with_its_name_and_description(server, mode):
    async with connected(server, mode) as client:
        (tool,) = (await client.list_tools()).tools
    assert tool.name == TOOL and tool.description == MCPFaceAgent.description
    assert tool.input_schema["required"] == ["prompt"]
    assert set(tool.input_schema["properties"]) == {"prompt", "history", "resume_token"}
    assert tool.output_schema is not None and tool.output_schema["required"] == ["documents"]


@pytest.mark.parametrize("mode", MODES)
async def test_a_call_is_the_answer_text_with_its_documents_as_structured_content(server, mode):
    async with connected(server, mode) as client:
        result = await client.call_tool(TOOL, {"prompt": "answer"})
    assert not result.is_error
    assert text_of(result) == "Forty-two."  # not the reasoning, nor the documents
    documents = result.structured_content["documents"]
    assert [document["name"] for document in documents] == ["TOOL_CALL", "TOOL_RESULT", "SOURCES"]
    assert documents[1]["content"]["result"] == {"hits": 3}
    assert documents[2]["content"]["results"][0]["url"] == "https://example.com"


@pytest.mark.parametrize("mode", MODES)
async def test_an_agent_error_is_an_is_error_result(server, mode):
    async with connected(server, mode) as client:
        failed = await client.call_tool(TOOL, {"prompt": "raise"})
        reported = await client.call_tool(TOOL, {"prompt": "fail:429"})
    assert failed.is_error
    assert AGENT_FAILED_MESSAGE in text_of(failed) and SECRET not in text_of(failed)
    assert failed.structured_content["error"]["code"] == 500
    assert text_of(failed).startswith("partial ")  # what it said before it failed comes first
    assert reported.is_error and "rate limited upstream" in text_of(reported)
    assert reported.structured_content["error"] == {"message": "rate limited upstream", "code": 429}


@pytest.mark.parametrize("mode", MODES)
async def test_progress_notifications_arrive_while_the_answer_is_made(server, mode, tmp_path):
    notes: list[tuple[float, str | None]] = []
    go_on = tmp_path / "go-on"

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        notes.append((progress, message))
        go_on.touch()  # the agent waits for this to say the rest: only a note sent before the end lets it on

    async with connected(server, mode) as client:
        result = await client.call_tool(TOOL, {"prompt": f"gated:{go_on}"}, progress_callback=on_progress)
    assert not result.is_error, text_of(result)
    assert text_of(result) == "first second"
    assert "".join(message or "" for _, message in notes) == text_of(result)  # the answer, as it came
    assert [progress for progress, _ in notes] == sorted({progress for progress, _ in notes})  # increasing


def test_progress_is_sent_only_when_the_call_asks_for_it(server):
    asked = messages_of(
        post(server, "/mcp", call_message({"prompt": "answer"}, meta={"progressToken": "p-1"}), **KEYED)
    )
    not_asked = messages_of(post(server, "/mcp", call_message({"prompt": "answer"}), **KEYED))
    progress = [message for message in asked if message.get("method") == "notifications/progress"]
    assert progress and all(message["params"]["progressToken"] == "p-1" for message in progress)
    assert [message["params"]["message"] for message in progress][-1] == "Forty-two."
    assert "THINKING: Let me think." in [message["params"]["message"] for message in progress]
    assert [message.get("method") for message in not_asked] == [None]  # the result alone
    assert not_asked[0]["result"]["content"][0]["text"] == "Forty-two."


def test_without_a_key_it_is_a_401_before_the_body_is_read(server):
    refused = post(server, "/mcp", LIST_MESSAGE, headers=HEADERS)
    assert refused.status_code == 401 and refused.headers["www-authenticate"] == "Bearer"
    assert refused.json()["error"]["message"] == "an API key is required: send Authorization: Bearer <key>"
    assert refused.json()["id"] is None and refused.json()["jsonrpc"] == "2.0"
    wrong = post(server, "/mcp", call_message({"prompt": "answer"}), key="not-the-key", headers=HEADERS)
    assert wrong.status_code == 401 and wrong.json()["error"]["message"] == "the API key is not valid"


def leaves(error: BaseException) -> list[BaseException]:
    """The exceptions an exception group holds, however deep; else the exception."""
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in leaves(inner)]
    return [error]


@pytest.mark.parametrize("mode", MODES)
async def test_the_sdk_client_without_a_key_is_told_why(server, mode):
    with pytest.raises(BaseException) as raised:  # noqa: PT011  (the SDK wraps it in its task groups' groups)
        async with connected(server, mode, key=None) as client:
            await client.list_tools()
    errors = [leaf for leaf in leaves(raised.value) if isinstance(leaf, MCPError)]
    assert errors and "an API key is required" in str(errors[0])


def test_a_body_past_the_limit_is_a_413_declared_or_chunked(server):
    big = call_message({"prompt": "x" * MAX_BODY})
    declared = post(server, "/mcp", big, **KEYED)
    assert declared.status_code == 413 and "larger than the limit" in declared.json()["error"]["message"]
    chunked = post(server, "/mcp", iter([json.dumps(big).encode()]), **KEYED)
    assert chunked.status_code == 413 and chunked.json()["error"]["message"] == declared.json()["error"]["message"]


def test_at_max_streams_it_is_a_503_and_the_place_comes_back(one_stream_server):
    with posting(one_stream_server, "/mcp", call_message({"prompt": "silent:5"}), headers=HEADERS) as held:
        assert held.status_code == 200
        refused = post(one_stream_server, "/mcp", LIST_MESSAGE, headers=HEADERS)
        assert refused.status_code == 503 and refused.headers["retry-after"] == "1"
        assert "limit of 1 concurrent streams" in refused.json()["error"]["message"]
    # The held call's client left: its agent is cancelled, its place freed.
    assert wait_until(lambda: one_stream_server.metric("assist_streams_open") == 0, 5), "the place was not given back"
    assert post(one_stream_server, "/mcp", LIST_MESSAGE, headers=HEADERS).status_code == 200


@pytest.mark.parametrize("mode", MODES)
async def test_the_time_limit_is_an_is_error_result_at_once(server, mode):
    async with connected(server, mode) as client:
        result = await client.call_tool(TOOL, {"prompt": "silent:30"})  # 30 s, past the time limit (2 s)
    assert result.is_error and TIMEOUT_MESSAGE in text_of(result)
    assert result.structured_content["error"]["code"] == 504


def test_a_client_that_closes_its_request_cancels_the_agent(server, tmp_path):
    marker = tmp_path / "cancelled"
    message = call_message({"prompt": f"hang:{marker}"}, meta={"progressToken": 7})
    with posting(server, "/mcp", message, **KEYED) as s:
        for event in iter_events(s):
            if "notifications/progress" in event.data:  # the agent is running: "waiting "
                break
    assert wait_for_file(marker, 3) is not None


@pytest.mark.parametrize("mode", MODES)
async def test_the_sdk_client_cancelling_its_call_cancels_the_agent(server, mode, tmp_path):
    """At 2026-07-28 the client cancels by closing the request; in the 2025 era it posts
    notifications/cancelled, which the face honours for the same key."""
    marker = tmp_path / "cancelled"
    async with connected(server, mode) as client:
        with anyio.move_on_after(1) as waited:
            await client.call_tool(TOOL, {"prompt": f"hang:{marker}"})
        assert waited.cancelled_caught
        assert wait_for_file(marker, 3) is not None


@pytest.mark.parametrize("mode", MODES)
async def test_a_pause_is_its_question_and_token_and_the_next_call_resumes_it(server, mode):
    async with connected(server, mode) as client:
        asked = await client.call_tool(TOOL, {"prompt": "ask:a day out"})
        pause = asked.structured_content["pause"]
        token = pause["resume_token"]
        resumed = await client.call_tool(TOOL, {"prompt": "Oslo", "resume_token": token})
        again = await client.call_tool(TOOL, {"prompt": "Lima", "resume_token": token})
    assert not asked.is_error
    assert (pause["kind"], pause["question"], pause["choices"]) == ("ask_user", "Which city?", ["Oslo", "Lima"])
    text = text_of(asked)
    assert text.startswith("I need to know one thing.\n\nWhich city?\n\n- Oslo\n- Lima")
    assert token in text  # where a client that shows only the text still finds it
    assert not resumed.is_error
    (document,) = resumed.structured_content["documents"]
    assert document["name"] == "RESUMED"
    assert document["content"] == {
        "answer": "Oslo",
        "state": {"step": 1, "asked": "a day out"},
        "question": "Which city?",
        "kind": "ask_user",
    }
    assert again.is_error and again.structured_content["error"]["code"] == 409  # answered once


async def test_a_resume_token_answers_only_to_the_key_that_asked(serve):
    # A model may copy the token where another user sees it: it is no use under their key.
    other = "the-key-of-another-mcp-client"
    server = serve({**AGENT, "ASSIST_API_KEYS": f"{KEY},{other}"})
    async with connected(server, "legacy") as client:
        token = (await client.call_tool(TOOL, {"prompt": "ask:x"})).structured_content["pause"]["resume_token"]
    async with connected(server, "legacy", key=other) as client:
        refused = await client.call_tool(TOOL, {"prompt": "Oslo", "resume_token": token})
    assert refused.is_error and refused.structured_content["error"]["code"] == 400
    assert "another key" in text_of(refused)
    async with connected(server, "legacy") as client:
        resumed = await client.call_tool(TOOL, {"prompt": "Oslo", "resume_token": token})
    assert not resumed.is_error


async def test_a_pause_after_a_history_resumes_and_a_changed_token_is_refused(server):
    history = [{"prompt": "first", "answer": "one"}, {"prompt": "second"}]
    async with connected(server, "legacy") as client:
        asked = await client.call_tool(TOOL, {"prompt": "ask:x", "history": history})
        token = asked.structured_content["pause"]["resume_token"]
        kind, sealed, prompts = token.split(".")
        other = kind + "." + sealed + "." + prompts[:-2] + ("A" if prompts[-2] != "A" else "B") + prompts[-1]
        changed = await client.call_tool(TOOL, {"prompt": "Oslo", "resume_token": other})
        garbled = await client.call_tool(TOOL, {"prompt": "Oslo", "resume_token": "not a token"})
        resumed = await client.call_tool(TOOL, {"prompt": "Oslo", "resume_token": token})
    assert changed.is_error and changed.structured_content["error"]["code"] == 400
    assert garbled.is_error and "resume_token: not one this agent gave" in text_of(garbled)
    assert not resumed.is_error and resumed.structured_content["documents"][0]["content"]["answer"] == "Oslo"


async def test_an_approval_is_a_pause_naming_the_call(server):
    async with connected(server, "legacy") as client:
        result = await client.call_tool(TOOL, {"prompt": "interrupt"})
    pause = result.structured_content["pause"]
    assert pause["kind"] == "interrupt" and pause["tool_call"]["name"] == "send_email"
    assert 'Send it?\n\n`send_email({"to":"ana@example.com"})`' in text_of(result)


async def test_the_history_argument_is_the_sessions(server):
    history = [{"prompt": "first", "answer": "one"}, {"prompt": "second", "answer": "two"}]
    async with connected(server, "auto") as client:
        result = await client.call_tool(TOOL, {"prompt": "session", "history": history})
    session = result.structured_content["documents"][0]["content"]
    assert (session["processor_id"], session["interactions"], session["prompts"]) == (TOOL, 2, ["first", "second"])


def test_arguments_it_cannot_take_are_a_tool_error_and_another_tool_a_protocol_error(server):
    (no_prompt,) = messages_of(post(server, "/mcp", call_message({"history": []}), **KEYED))
    assert no_prompt["result"]["isError"] and "prompt: a string is required" in str(no_prompt["result"])
    (bad_history,) = messages_of(
        post(server, "/mcp", call_message({"prompt": "answer", "history": [{"answer": "x"}]}), **KEYED)
    )
    assert bad_history["result"]["isError"] and "history[0].prompt" in str(bad_history["result"])
    message = call_message({"prompt": "answer"})
    message["params"]["name"] = "another"
    (unknown,) = messages_of(post(server, "/mcp", message, **KEYED))
    assert unknown["error"]["code"] == -32602 and TOOL in unknown["error"]["message"]


@pytest.mark.parametrize("mode", MODES)
async def test_a_call_in_flight_at_sigterm_gets_its_answer_within_the_shutdown_grace(mode):
    env = {**AGENT, "ASSIST_SHUTDOWN_GRACE": "20", "ASSIST_REQUEST_TIMEOUT": "20"}
    with running_server(env) as server:
        notes: list[str | None] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            if not notes:  # the answer has started: stop the server under it
                server.process.send_signal(signal.SIGTERM)
            notes.append(message)

        async with connected(server, mode, key=None) as client:
            await client.list_tools()  # as a client does on connecting: the call needs no list after it
            result = await client.call_tool(TOOL, {"prompt": "slowly:8"}, progress_callback=on_progress)
        assert not result.is_error
        assert text_of(result) == "".join(f"word{index} " for index in range(8))
        assert server.process.wait(timeout=15) in (0, -signal.SIGTERM)
        assert "Traceback" not in server.log() and "ASGI callable returned without" not in server.log()


async def test_a_call_still_running_when_the_grace_ends_gets_a_503_result_not_a_dropped_request():
    env = {**AGENT, "ASSIST_SHUTDOWN_GRACE": "1", "ASSIST_REQUEST_TIMEOUT": "20"}
    with running_server(env) as server:
        signalled = False

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            nonlocal signalled
            if not signalled:
                server.process.send_signal(signal.SIGTERM)
                signalled = True

        async with connected(server, "legacy", key=None) as client:
            await client.list_tools()
            result = await client.call_tool(TOOL, {"prompt": "slowly:40"}, progress_callback=on_progress)  # 8 s
        assert result.is_error and "shutting down" in text_of(result)
        assert server.process.wait(timeout=15) in (0, -signal.SIGTERM)


def test_there_is_no_session_to_get_or_delete(server):
    for method in ("GET", "DELETE"):
        refused = httpx.request(method, server.url + "/mcp", headers={"Authorization": f"Bearer {KEY}"})
        assert refused.status_code == 405 and refused.headers["allow"] == "POST"


def test_an_app_of_yours_serves_it_with_add_routes_and_keeps_its_own_lifespan():
    from contextlib import asynccontextmanager as lifespan_of

    ran = []

    @lifespan_of
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        ran.append("started")
        yield
        ran.append("stopped")

    app = FastAPI(lifespan=lifespan)
    add_routes(app, MCPFaceAgent(), path="/agent", settings=load_settings(), mcp_path="/mcp")
    with TestClient(app) as client:
        (listed,) = messages_of(client.post("/agent/mcp", json=LIST_MESSAGE, headers=HEADERS))
        answered = messages_of(client.post("/agent/mcp", json=call_message({"prompt": "answer"}), headers=HEADERS))
        assert client.post("/mcp", json=LIST_MESSAGE, headers=HEADERS).status_code == 404  # only where asked
    assert listed["result"]["tools"][0]["name"] == TOOL
    assert answered[-1]["result"]["content"][0]["text"] == "Forty-two."
    assert ran == ["started", "stopped"]


def _fresh_interpreter(code: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=clean_env(env), timeout=60
    )


def test_importing_the_service_imports_no_mcp_until_the_app_is_made():
    code = (
        "import json, sys\n"
        "from sentient_assist import create_app\n"
        "before = 'mcp' in sys.modules\n"
        "paths = create_app().openapi()['paths']\n"
        "print(json.dumps({'before': before, 'after': 'mcp' in sys.modules, 'mcp': '/mcp' in paths}))\n"
    )
    out = _fresh_interpreter(code, {"ASSIST_AGENT": "echo", "ASSIST_LOG_LEVEL": "warning", **ALL_FACES})
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {"before": False, "after": True, "mcp": True}


# The MCP Inspector's CLI, from npm (tests/mcp_inspector/package.json pins it), run by the system's node.


def _inspector_bin() -> Path:
    """Its `inspector` command: tests/mcp_inspector's (`npm ci --prefix tests/mcp_inspector`,
    as CI installs it), else installed once from the same lock into a folder outside the tree."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("node and npm are not installed (Debian: apt-get install nodejs npm)")
    installed = INSPECTOR / "node_modules" / ".bin" / "inspector"
    if installed.exists():
        return installed
    lock = (INSPECTOR / "package-lock.json").read_bytes()
    folder = Path(tempfile.gettempdir()) / f"sentient-assist-mcp-inspector-{hashlib.sha256(lock).hexdigest()[:12]}"
    installed = folder / "node_modules" / ".bin" / "inspector"
    if not installed.exists():
        folder.mkdir(exist_ok=True)
        for name in ("package.json", "package-lock.json"):
            shutil.copy(INSPECTOR / name, folder / name)
        npm = ["npm", "ci", "--no-audit", "--no-fund", "--prefix", str(folder)]
        done = subprocess.run(npm, capture_output=True, text=True, timeout=600)
        if done.returncode != 0 or not installed.exists():
            pytest.skip(f"@modelcontextprotocol/inspector could not be installed from npm: {done.stderr[-500:]}")
    return installed


@pytest.fixture(scope="module")
def inspector(tmp_path_factory) -> tuple[list[str], dict[str, str]]:
    command = _inspector_bin()
    home = tmp_path_factory.mktemp("inspector-home")  # where it keeps its catalog and storage
    env = {**os.environ, "HOME": str(home), "MCP_CATALOG_PATH": str(home / "mcp.json"), "NO_COLOR": "1"}
    return [str(command)], env


def run_inspector(inspector, server: RunningServer, *args: str) -> dict:
    """What `inspector --cli <the server's /mcp> --transport http <args>` prints, as JSON."""
    command, env = inspector
    url = server.url + "/mcp"
    full = [*command, "--cli", url, "--transport", "http", "--header", f"Authorization: Bearer {KEY}", *args]
    done = subprocess.run(full, capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)


def test_the_inspector_cli_lists_and_calls_the_tool(server, inspector):
    listed = run_inspector(inspector, server, "--method", "tools/list")
    assert [tool["name"] for tool in listed["tools"]] == [TOOL]
    call = ("--method", "tools/call", "--tool-name", TOOL)
    called = run_inspector(inspector, server, *call, "--tool-arg", "prompt=answer")
    assert called["isError"] is False and called["content"] == [{"type": "text", "text": "Forty-two."}]
    assert [document["name"] for document in called["structuredContent"]["documents"]][-1] == "SOURCES"
    asked = run_inspector(inspector, server, *call, "--tool-arg", "prompt=ask:x")
    token = asked["structuredContent"]["pause"]["resume_token"]
    resumed = run_inspector(inspector, server, *call, "--tool-arg", "prompt=Lima", f"resume_token={token}")
    assert resumed["structuredContent"]["documents"][0]["content"]["answer"] == "Lima"
