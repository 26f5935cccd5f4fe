"""POST /agui: the served agent as an AG-UI backend (docs/agui.md), against a real uvicorn
serving tests/server/agui_agents.py. The clients: raw HTTP, each event parsed by ag-ui-protocol's
own types, and `@ag-ui/client`'s HttpAgent from npm run by node (tests/agui_client), a client
nobody here wrote, its event verifier checking every run."""

from __future__ import annotations

import hashlib
import json
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import httpx
import pytest
from ag_ui.core import Event, EventType, RunFinishedEvent
from pydantic import TypeAdapter

from sentient_assist.runtime.run import AGENT_FAILED_MESSAGE
from tests.support import sse
from tests.support.agents import SECRET
from tests.support.files import wait_for_file
from tests.support.request import post, posting
from tests.support.server import ALL_FACES, ROOT, RunningServer, Servers, running_server
from tests.support.sse import iter_events
from tests.support.waiting import wait_until

KEY = "test-key-for-the-agui-face"
TIME_LIMIT = 2.0
MAX_BODY = 16_384
AGENT = {"ASSIST_AGENT": "tests.server.agui_agents:AguiAgent", "ASSIST_LOG_LEVEL": "warning", **ALL_FACES}
LLM_AGENT = {"ASSIST_AGENT": "tests.server.agui_agents:agui_llm", "ASSIST_LOG_LEVEL": "warning", **ALL_FACES}
CLIENT = ROOT / "tests" / "agui_client"
EVENTS: TypeAdapter[Any] = TypeAdapter(Event)

pytestmark = pytest.mark.timeout(120)


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
def llm_server(serve: Servers) -> RunningServer:
    return serve(LLM_AGENT)


def run_input(*messages: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {"threadId": "thread-1", "runId": "run-1", "messages": list(messages), **fields}


def user(content: Any, id_: str = "u1") -> dict[str, Any]:
    return {"id": id_, "role": "user", "content": content}


def events_of(response: httpx.Response) -> list[Any]:
    """Each event of the stream, parsed by ag-ui-protocol's own event types."""
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/event-stream")
    return [EVENTS.validate_json(event.data) for event in sse.events_of(response.text)]


def types_of(events: list[Any]) -> list[str]:
    return [event.type.value for event in events]


def test_every_event_kind_parses_as_ag_ui_types(server):
    events = events_of(post(server, "/agui", run_input(user("everything")), key=KEY))
    assert types_of(events) == [
        "RUN_STARTED",
        *("REASONING_START", "REASONING_MESSAGE_START", "REASONING_MESSAGE_CONTENT", "REASONING_MESSAGE_CONTENT"),
        *("REASONING_MESSAGE_END", "REASONING_END"),
        "STEP_STARTED",  # the search stage begins
        *("TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END", "TOOL_CALL_RESULT"),
        "STEP_FINISHED",
        *("STEP_STARTED", "STEP_FINISHED"),  # the route stage, told only as it ends
        "STEP_STARTED",  # the hand-off
        "CUSTOM",  # SOURCES
        *("TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END"),  # the STATUS block
        *("TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_CONTENT"),
        "TEXT_MESSAGE_END",
        "STEP_FINISHED",  # the hand-off's step ends with the run
        "RUN_FINISHED",
    ]
    started, finished = events[0], events[-1]
    assert (started.thread_id, started.run_id) == ("thread-1", "run-1")
    assert isinstance(finished, RunFinishedEvent) and finished.result == {"answer": 42}
    assert finished.usage is not None and finished.usage[0].total_tokens == 17
    call = next(e for e in events if e.type is EventType.TOOL_CALL_START)
    assert (call.tool_call_id, call.tool_call_name) == ("call-1", "lookup")
    args = next(e for e in events if e.type is EventType.TOOL_CALL_ARGS)
    assert json.loads(args.delta) == {"q": "answer"}
    result = next(e for e in events if e.type is EventType.TOOL_CALL_RESULT)
    assert json.loads(result.content) == {"hits": 3}
    custom = next(e for e in events if e.type is EventType.CUSTOM)
    assert custom.name == "SOURCES" and custom.value["results"][0]["title"] == "a source"
    answer = "".join(e.delta for e in events if e.type is EventType.TEXT_MESSAGE_CONTENT)
    assert answer == "found itForty-two."
    steps = [e.step_name for e in events if e.type is EventType.STEP_STARTED]
    assert steps == ["search", "route", "handoff:weather"]


def test_the_agent_gets_history_state_and_context(server):
    body = run_input(
        user("echo:one", "u1"),
        {"id": "a1", "role": "assistant", "content": "You said one."},
        user("echo:two", "u2"),
        state={"theme": "dark"},
        context=[{"description": "page", "value": "settings"}],
    )
    events = events_of(post(server, "/agui", body, key=KEY))
    seen = next(e for e in events if e.type is EventType.CUSTOM and e.name == "SEEN").value
    assert seen == {
        "prompt": "two",
        "past": [{"prompt": "echo:one", "answers": ["You said one."]}],
        "state": {"theme": "dark"},
        "context": ["settings"],
    }


def test_a_failing_agent_is_a_run_error_without_its_internals(server):
    events = events_of(post(server, "/agui", run_input(user("raise")), key=KEY))
    assert types_of(events)[0] == "RUN_STARTED" and types_of(events)[-1] == "RUN_ERROR"
    error = events[-1]
    assert error.message == AGENT_FAILED_MESSAGE and error.code == "500"
    assert SECRET not in json.dumps([e.model_dump(mode="json") for e in events])


def test_the_time_limit_is_a_run_error(server):
    events = events_of(post(server, "/agui", run_input(user("slowly:50")), key=KEY))
    assert events[-1].type is EventType.RUN_ERROR and events[-1].code == "504"
    # The message it was writing was ended before the error.
    assert types_of(events)[-2] == "TEXT_MESSAGE_END"


def test_keys_are_checked_before_anything(server):
    assert post(server, "/agui", run_input(user("everything"))).status_code == 401
    assert post(server, "/agui", run_input(user("everything")), key="wrong").status_code == 401


@pytest.mark.parametrize(
    ("body", "status", "named"),
    [
        (run_input(), 400, "messages"),
        ({"threadId": "t", "messages": [user("x")]}, 422, "runId"),
        (run_input(user("x"), {"id": "a", "role": "assistant", "content": "hi"}), 400, "messages[1].role"),
        (
            run_input(user([{"type": "image", "source": {"type": "url", "value": "https://x/y.png"}}])),
            400,
            "messages[0].content[0].type",
        ),
        (run_input(user("x"), resume=[{"interruptId": "nope", "status": "resolved"}]), 400, "resume[0].interruptId"),
        (
            run_input(user("x"), resume=[{"interruptId": "ask_user:gAAAA", "status": "resolved"}]),
            400,
            "resume[0].interruptId",
        ),
        (run_input(user("x"), {"id": "t", "role": "tool", "toolCallId": "c", "content": "y"}), 400, "messages[1]"),
        ({**run_input(user("x")), "threadId": "t" * 300}, 400, "threadId"),
    ],
)
def test_bad_input_is_a_4xx_naming_the_field(server, body, status, named):
    response = post(server, "/agui", body, key=KEY)
    assert response.status_code == status, response.text
    assert named in response.text
    assert "Traceback" not in response.text


def test_a_body_past_the_limit_is_a_413(server):
    assert post(server, "/agui", run_input(user("x" * (MAX_BODY + 1))), key=KEY).status_code == 413


def test_client_tools_reach_an_llm_agent_with_context_and_state(llm_server):
    tools = [{"name": "get_weather", "description": "The weather.", "parameters": {"type": "object"}}]
    body = run_input(user("told"), tools=tools, state={"n": 1}, context=[{"description": "page", "value": "home"}])
    text = "".join(
        e.delta for e in events_of(post(llm_server, "/agui", body)) if e.type is EventType.TEXT_MESSAGE_CONTENT
    )
    assert "You are a test." in text and "- page: home" in text and '{"n":1}' in text
    assert "get_weather" in text and "notify" in text
    clash = run_input(user("told"), tools=[{"name": "notify", "description": "mine"}])
    refused = post(llm_server, "/agui", clash)
    assert refused.status_code == 400 and "tools[0].name" in refused.text


def test_pauses_and_client_tools_parse_as_ag_ui_types(llm_server):
    tools = [{"name": "get_weather", "description": "The weather.", "parameters": {"type": "object"}}]
    asked = run_input(user("weather"), tools=tools)
    events = events_of(post(llm_server, "/agui", asked))
    assert types_of(events) == [
        "RUN_STARTED",
        *("TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END", "REASONING_ENCRYPTED_VALUE"),
        "RUN_FINISHED",
    ]
    call, carried, finished = events[1], events[4], events[-1]
    assert carried.entity_id == call.tool_call_id and carried.encrypted_value.startswith("interrupt:")
    assert finished.outcome.pending_tool_call_ids == [call.tool_call_id]
    # The client answers it: its tool message after the call, the call's encrypted value kept.
    assistant = {
        "id": "a1",
        "role": "assistant",
        "toolCalls": [
            {
                "id": call.tool_call_id,
                "type": "function",
                "function": {"name": "get_weather", "arguments": events[2].delta},
                "encryptedValue": carried.encrypted_value,
            }
        ],
    }
    answer = {"id": "t1", "role": "tool", "toolCallId": call.tool_call_id, "content": "rain"}
    answered = run_input(user("weather"), assistant, answer, tools=tools)
    resumed = events_of(post(llm_server, "/agui", answered))
    assert "".join(e.delta for e in resumed if e.type is EventType.TEXT_MESSAGE_CONTENT) == 'Got: "rain"'
    again = post(llm_server, "/agui", answered)
    assert again.status_code == 409 and "toolCalls[0].encryptedValue" in again.text
    # A changed token is refused before anything runs.
    assistant["toolCalls"][0]["encryptedValue"] = carried.encrypted_value[:-4] + "AAAA"
    forged = post(llm_server, "/agui", run_input(user("weather"), assistant, answer, tools=tools))
    assert forged.status_code == 400 and "encryptedValue" in forged.text

    paused = events_of(post(llm_server, "/agui", run_input(user("ask"))))
    [interrupt] = paused[-1].outcome.interrupts
    assert (interrupt.reason, interrupt.message) == ("ask_user", "Which city?")
    assert interrupt.response_schema == {"type": "string", "enum": ["Oslo"]}
    resume = [{"interruptId": interrupt.id, "status": "resolved", "payload": {"answer": "Oslo"}}]
    # On another conversation, the interrupt is not that one's: refused, and not used up.
    other = post(llm_server, "/agui", run_input(user("something else"), resume=resume))
    assert other.status_code == 400 and "resume[0].interruptId" in other.text
    done = events_of(post(llm_server, "/agui", run_input(user("ask"), resume=resume)))
    assert "".join(e.delta for e in done if e.type is EventType.TEXT_MESSAGE_CONTENT) == "Got: Oslo"


def test_max_streams_counts_agui_streams(serve):
    running = serve({**AGENT, "ASSIST_MAX_STREAMS": "1"})
    with posting(running, "/agui", run_input(user("slowly:30"))) as first:
        events = iter_events(first)  # kept: a generator dropped closes its response
        next(events)  # RUN_STARTED: its place is held
        second = post(running, "/agui", run_input(user("everything")))
        assert second.status_code == 503 and "Retry-After" in second.headers
        assistant = post(running, "/assist", {"query": {"id": "01J0000000000000000000000A", "prompt": "x"}})
        assert assistant.status_code == 503  # one budget for every face
    # Its place is given back once the service has seen the client go: for the next test on this server.
    assert wait_until(lambda: running.metric("assist_streams_open") == 0, 5)


def test_shutdown_ends_an_open_run_with_a_run_error():
    with running_server({**AGENT, "ASSIST_SHUTDOWN_GRACE": "1"}) as running:
        with posting(running, "/agui", run_input(user("slowly:100"))) as stream:
            events = iter_events(stream)
            received = [next(events)]
            running.process.send_signal(signal.SIGTERM)
            received += events
    last = EVENTS.validate_json(received[-1].data)
    assert last.type is EventType.RUN_ERROR and last.code == "503"


# @ag-ui/client's HttpAgent (npm; tests/agui_client/package.json pins it), run by the system's node.


def _client_dir() -> Path:
    """tests/agui_client with its node_modules (`npm ci --prefix tests/agui_client`, as CI installs
    it), else a copy installed once from the same lock into a folder outside the tree."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("node and npm are not installed (Debian: apt-get install nodejs npm)")
    if (CLIENT / "node_modules" / "@ag-ui" / "client").exists():
        return CLIENT
    lock = (CLIENT / "package-lock.json").read_bytes()
    folder = Path(tempfile.gettempdir()) / f"sentient-assist-agui-client-{hashlib.sha256(lock).hexdigest()[:12]}"
    if not (folder / "node_modules" / "@ag-ui" / "client").exists():
        folder.mkdir(exist_ok=True)
        for name in ("package.json", "package-lock.json"):
            shutil.copy(CLIENT / name, folder / name)
        npm = ["npm", "ci", "--no-audit", "--no-fund", "--prefix", str(folder)]
        done = subprocess.run(npm, capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            pytest.skip(f"@ag-ui/client could not be installed from npm: {done.stderr[-500:]}")
    shutil.copy(CLIENT / "run.mjs", folder / "run.mjs")
    return folder


@pytest.fixture(scope="module")
def client_dir() -> Path:
    return _client_dir()


def http_agent(client_dir: Path, scenario: str, server: RunningServer, key: str = "", argument: str = "") -> dict:
    """What tests/agui_client/run.mjs prints for `scenario` against the server's /agui."""
    command = ["node", str(client_dir / "run.mjs"), scenario, server.url + "/agui", key, argument]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, cwd=client_dir)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def run_types(run: dict) -> list[str]:
    return [event["type"] for event in run["events"]]


def test_http_agent_verifies_every_event_kind(server, client_dir):
    output = http_agent(client_dir, "everything", server, KEY)
    assert output["check"]["error"] is None  # verifyEvents() found nothing wrong
    run = output["run"]
    assert run["failed"] is None and run["thrown"] is None  # nor did runAgent's pipeline
    assert run_types(run) == output["check"]["events"]
    kinds = set(run_types(run))
    assert {"RUN_STARTED", "REASONING_START", "TEXT_MESSAGE_START", "TOOL_CALL_START", "TOOL_CALL_RESULT"} <= kinds
    assert {"STEP_STARTED", "STEP_FINISHED", "CUSTOM", "RUN_FINISHED"} <= kinds
    answers = [m for m in run["messages"] if m["role"] == "assistant" and m.get("content")]
    assert answers[-1]["content"] == "Forty-two."
    assert run["result"] == {"answer": 42}


def test_http_agent_two_turns(server, client_dir):
    output = http_agent(client_dir, "two_turns", server, KEY)
    first, second = output["first"], output["second"]
    assert first["failed"] is None and second["failed"] is None
    seen = next(e["value"] for e in second["events"] if e["type"] == "CUSTOM" and e["name"] == "SEEN")
    assert seen["past"] == [{"prompt": "echo:one", "answers": ["You said one."]}]
    assert seen["state"] == {"theme": "dark"} and seen["context"] == ["settings"]
    assert [m["content"] for m in second["messages"]] == ["echo:one", "You said one.", "echo:two", "You said two."]


def test_http_agent_gets_an_error_and_nothing_after_it(server, client_dir):
    output = http_agent(client_dir, "error", server, KEY)
    assert output["check"]["error"] is None
    run = output["run"]
    assert run_types(run)[-1] == "RUN_ERROR"
    assert run["events"][-1]["message"] == "rate limited upstream" and run["events"][-1]["code"] == "429"
    later = [e for e in run["events"] if e["type"] == "CUSTOM"]
    assert later[0]["name"] == "error" and later[0]["value"]["code"] == 503


def test_http_agent_answers_a_client_tool_call(llm_server, client_dir):
    output = http_agent(client_dir, "client_tool", llm_server)
    assert output["check"]["error"] is None
    first, second = output["first"], output["second"]
    assert run_types(first) == [
        "RUN_STARTED",
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "REASONING_ENCRYPTED_VALUE",
        "RUN_FINISHED",
    ]
    finished = first["events"][-1]
    call = first["events"][1]
    assert call["toolCallName"] == "get_weather"
    assert finished["outcome"] == {"type": "success", "pendingToolCallIds": [call["toolCallId"]]}
    # HttpAgent kept the call with its encrypted value, and sent it back with its answer.
    assert second["failed"] is None
    answer = "".join(e["delta"] for e in second["events"] if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert answer == 'Got: "sunny, 24C"'
    assert "TOOL_CALL_START" not in run_types(second)  # the client holds the call and its result already


@pytest.mark.parametrize(
    ("argument", "reason", "answer"), [("ask", "ask_user", "Got: Oslo"), ("approve", "approval", 'Got: "notified ana"')]
)
def test_http_agent_resumes_an_interrupt_once(llm_server, client_dir, argument, reason, answer):
    output = http_agent(client_dir, "interrupt", llm_server, "", argument)
    assert output["check"]["error"] is None
    first = output["first"]
    assert first["events"][-1]["outcome"]["type"] == "interrupt"
    [interrupt] = output["interrupts"]
    assert interrupt["reason"] == reason
    second = output["second"]
    assert second["failed"] is None
    said = "".join(e["delta"] for e in second["events"] if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert said == answer
    assert "HTTP 409" in output["again"]["failed"]  # a pause is answered once


def test_http_agent_abort_cancels_the_agent(server, client_dir, tmp_path):
    cancelled = tmp_path / "cancelled"
    output = http_agent(client_dir, "abort", server, KEY, f"slowly:100:{cancelled}")
    assert "TEXT_MESSAGE_CONTENT" in run_types(output["run"])
    assert wait_for_file(cancelled, timeout=10) == "cancelled"  # the agent's task was cancelled


def test_http_agent_reads_a_refusal(server, client_dir):
    run = http_agent(client_dir, "refused", server, KEY)["run"]
    assert run["failed"].startswith("HTTP 400") and "messages" in run["failed"]
