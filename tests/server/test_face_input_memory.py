"""What AG-UI's and MCP's inputs hold for a run (issue 40, item 4), against a real uvicorn
serving tests/server/agui_agents.py on every face.

- AG-UI's `state`, `forwardedProps`, `context` and tools' `parameters` are kept as compact JSON
  for the run, and counted with the history in ASSIST_MAX_HISTORY_BYTES_TOTAL: 10 open streams
  whose 1 MB body is mostly `[{},{},...]` in one of them grow the server's RSS by under 4 MB
  each (before: 21-24 MB each); the agent still reads the state as JSON.
- MCP's `tools/call` is checked before the SDK parses it: an argument that is not the tool's,
  a history turn's field that is not a turn's, and more JSON values than the service reads
  anywhere else in the message (`params`, `_meta`) are JSON-RPC errors naming where (before:
  20-28 MB held per call for the whole of it).
The figures per shape are bench/face_inputs.py's to measure; every load here is bounded (at
most 10 held streams, sockets with timeouts).
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tests.support.held_stream import HeldStream, rss_mb_per_held_stream
from tests.support.request import post
from tests.support.server import ALL_FACES, RunningServer, Servers
from tests.support.sse import events_of
from tests.support.waiting import wait_until

MAX_BODY = 1_048_576
ENV = {"ASSIST_AGENT": "tests.server.agui_agents:AguiAgent", "ASSIST_LOG_LEVEL": "warning", **ALL_FACES}
SETTING = "ASSIST_MAX_HISTORY_BYTES_TOTAL"
MCP_HEADERS = {
    "Accept": "application/json, text/event-stream",
    "Content-Type": "application/json",
    "MCP-Protocol-Version": "2025-06-18",
}

pytestmark = pytest.mark.timeout(120)


def empties(size: int = MAX_BODY - 4096) -> list[dict]:
    """`[{},{},...]` of about `size` bytes: the shape that costs most as Python objects."""
    return [{}] * (size // 3)


def run_input(prompt: str, **fields: Any) -> dict[str, Any]:
    return {"threadId": "t", "runId": "r", "messages": [{"id": "u", "role": "user", "content": prompt}], **fields}


def dumps(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def tools_call(arguments: dict[str, Any], **params: Any) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "agui-agent", "arguments": arguments, **params},
    }


@pytest.fixture(scope="module")
def server(serve: Servers) -> RunningServer:
    return serve({**ENV, "ASSIST_REQUEST_TIMEOUT": "60"})


@pytest.fixture(scope="module")
def budget_server(serve: Servers) -> RunningServer:
    # Room for one 1 MB input beside its history, not two; bodies up to 4 MB.
    return serve(
        {**ENV, SETTING: str(1_500_000), "ASSIST_MAX_BODY_BYTES": str(4 * MAX_BODY), "ASSIST_REQUEST_TIMEOUT": "60"}
    )


BULKY = {
    "state": lambda: run_input("silent:30", state={"rows": empties()}),
    "forwardedProps": lambda: run_input("silent:30", forwardedProps={"rows": empties()}),
    "tools[0].parameters": lambda: run_input(
        "silent:30",
        tools=[{"name": "t", "description": "d", "parameters": {"type": "object", "examples": empties()}}],
    ),
}


def test_ten_agui_streams_with_a_1_mb_state_or_props_hold_under_4_mb_each(server):
    for make in BULKY.values():  # the allocator's first arenas, and each shape answered
        response = post(server, "/agui", dumps({**make(), "messages": run_input("fast:1")["messages"]}))
        assert response.status_code == 200 and "RUN_FINISHED" in response.text, response.text[:300]
    assert wait_until(lambda: server.metric("assist_streams_open") == 0, 10)
    bodies = [dumps(make()) for make in list(BULKY.values()) * 4][:10]
    assert all(MAX_BODY - 8192 < len(body) <= MAX_BODY for body in bodies)
    per_stream = rss_mb_per_held_stream(server, bodies, path="/agui")
    assert per_stream < 4, f"{per_stream:.1f} MB per open stream"


def test_the_agent_reads_the_state_and_props_as_the_client_sent_them(server):
    state = {"theme": "dark", "rows": [{}, [], {"n": 1.5, "s": "é\u2028"}], "none": None}
    response = post(server, "/agui", run_input("echo:hi", state=state, forwardedProps={"x": 1}))
    seen = next(event.json for event in events_of(response.text) if event.json.get("name") == "SEEN")
    assert seen["value"]["state"] == state
    # What the encoder that keeps it refuses (an integer past 64 bits) is kept exactly; NaN,
    # which JSON has not, is null, as a browser's JSON.stringify writes it.
    for odd, kept in [
        (b'{"big":1180591620717411303424,"n":NaN}', {"big": 2**70, "n": None}),
        (b'{"n":[NaN,-Infinity,1.5]}', {"n": [None, None, 1.5]}),
    ]:
        response = post(server, "/agui", dumps(run_input("echo:hi"))[:-1] + b',"state":' + odd + b"}")
        seen = next(event.json for event in events_of(response.text) if event.json.get("name") == "SEEN")
        assert seen["value"]["state"] == kept


@pytest.mark.parametrize("field", list(BULKY))
def test_a_bulky_agui_input_is_counted_in_the_history_budget(budget_server, field):
    held = HeldStream(budget_server, dumps(BULKY[field]()), path="/agui")
    try:
        assert held.status == 200
        held.first_event()
        refused = post(budget_server, "/agui", dumps(BULKY[field]()))
        assert refused.status_code == 503 and refused.headers["retry-after"] == "1"
        assert SETTING in refused.text
        # Small inputs still fit beside it.
        assert post(budget_server, "/agui", run_input("fast:1", state={"a": 1})).status_code == 200
    finally:
        held.close()
    assert wait_until(lambda: budget_server.metric("assist_streams_open") == 0, 10)
    twice = run_input("fast:1", state=empties(2 * MAX_BODY))
    too_large = post(budget_server, "/agui", dumps(twice))
    assert too_large.status_code == 413 and SETTING in too_large.text


@pytest.mark.parametrize(
    ("path", "head"),
    [
        ("/agui", b'{"threadId":"t","runId":"r","messages":[{"id":"u","role":"user","content":"x"}],"state":'),
        ("/assist", b'{"query":{"id":"01JDQ4Z8M7T3V5X9A2B4C6D8EF","prompt":"x"},"extra":'),
        ("/v1/chat/completions", b'{"model":"m","messages":[{"role":"user","content":"x"}],"extra":'),
    ],
)
def test_a_body_nested_past_what_json_reads_is_a_400_naming_the_body(server, path, head):
    response = post(server, path, head + b"[" * 5_000 + b"{}" + b"]" * 5_000 + b"}")
    assert response.status_code == 400, response.text[:300]
    assert "body: nested too deep to be read" in response.text and "Traceback" not in response.text


@pytest.mark.parametrize(
    ("field", "nested"),
    [
        ("state", b"[" * 300 + b"]" * 300),
        ("forwardedProps", b'{"a":' * 300 + b"1" + b"}" * 300),
        ("state", b"[1180591620717411303424," + b"[" * 900 + b"]" * 900 + b"]"),
    ],
)
def test_an_agui_input_nested_past_what_is_kept_is_a_400_naming_it(server, field, nested):
    response = post(server, "/agui", dumps(run_input("echo:hi"))[:-1] + f',"{field}":'.encode() + nested + b"}")
    assert response.status_code == 400, response.text[:300]
    assert f"{field}: nested more than 255 levels deep" in response.text


def test_ten_mcp_calls_with_a_1_mb_history_each_hold_under_5_mb_each(server):
    history = [{"prompt": f"{index:x}".ljust(80, "."), "answer": "a"} for index in range(9_500)]
    body = dumps(tools_call({"prompt": "silent:30", "history": history}, _meta={"progressToken": 1}))
    assert MAX_BODY - 100_000 < len(body) <= MAX_BODY
    warm = post(server, "/mcp", body.replace(b"silent:30", b"fast:1"), headers=MCP_HEADERS)
    assert warm.status_code == 200 and "isError" in warm.text, warm.text[:300]
    assert wait_until(lambda: server.metric("assist_streams_open") == 0, 10)
    # Each held to its first event: the progress note of the agent's first event.
    per_stream = rss_mb_per_held_stream(server, [body] * 10, path="/mcp", headers={"Accept": MCP_HEADERS["Accept"]})
    # About 8 MB before; of the 4 now, 2 are the SDK's own two copies of the body.
    assert per_stream < 5, f"{per_stream:.1f} MB per open call"


def mcp_error(server: RunningServer, message: dict[str, Any]) -> dict[str, Any]:
    response = post(server, "/mcp", dumps(message), headers=MCP_HEADERS)
    assert response.status_code < 500, response.text[:300]
    answer = response.json()
    assert "error" in answer and "result" not in answer, str(answer)[:300]
    return answer["error"]


@pytest.mark.parametrize(
    ("message", "named"),
    [
        (tools_call({"prompt": "x", "extra": empties()}), "arguments.extra"),
        (tools_call({"prompt": "x", "history": [{"prompt": "q", "answer": "a", "x": empties()}]}), "history[0].x"),
        (tools_call({"prompt": "x"}, junk=empties()), "params.junk"),
        (tools_call({"prompt": "x"}, _meta={"progressToken": 1, "junk": empties()}), "params._meta.junk"),
        (tools_call({"prompt": "x", "history": [{"prompt": "q"}] * 20_001}), "history"),
    ],
)
def test_an_mcp_call_holding_what_the_tool_does_not_read_is_refused_naming_it(server, message, named):
    error = mcp_error(server, message)
    assert named in error["message"], error
    assert "Traceback" not in json.dumps(error)


def test_an_mcp_call_of_the_tools_arguments_is_answered(server):
    message = tools_call({"prompt": "echo:two", "history": [{"prompt": "echo:one", "answer": "You said one."}]})
    response = post(server, "/mcp", message, headers=MCP_HEADERS)
    assert response.status_code == 200
    (answer,) = [event.json for event in events_of(response.text) if event.data] or [response.json()]
    text = answer["result"]["content"][0]["text"]
    assert "You said two." in text
    with httpx.Client(base_url=server.url, timeout=20) as client:
        listed = client.post("/mcp", json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, headers=MCP_HEADERS)
    assert listed.status_code == 200
