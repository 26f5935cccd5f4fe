"""MCP servers' tools for an LLMAgent (sentient_assist/llm/mcp.py), against real servers: the
tests' own (tests/support/mcp_server.py, written with the mcp SDK) over stdio and streamable
HTTP, the reference `mcp-server-time` from PyPI over stdio, and through the service."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio

from sentient_assist import Agent, Approval, AskUser, LLMAgent, UsageLimits
from sentient_assist.llm import ChatMessage, MCPServerStdio, MCPServerStreamableHTTP, ToolSpec
from sentient_assist.llm.mcp import MCPToolset
from sentient_assist.testing import FunctionModel, ScriptedCall, ScriptedModel, ScriptedReply
from tests.support.mcp_server import PATH, HttpServer, alive, processes
from tests.support.server import ROOT, running_server
from tests.support.sse import new_body, read_response
from tests.support.waiting import until, wait_until

pytestmark = pytest.mark.timeout(90)


class Servers:
    """The MCP servers a test made, each closed after it (its process stopped)."""

    def __init__(self) -> None:
        self.made: list[MCPToolset] = []

    def stdio(self, **options: Any) -> MCPServerStdio:
        server = MCPServerStdio(sys.executable, [str(PATH)], **options)
        self.made.append(server)
        return server

    def http(self, url: str, **options: Any) -> MCPServerStreamableHTTP:
        server = MCPServerStreamableHTTP(url, **options)
        self.made.append(server)
        return server

    def time(self, **options: Any) -> MCPServerStdio:
        server = MCPServerStdio("mcp-server-time", args=["--local-timezone", "UTC"], **options)
        self.made.append(server)
        return server


@pytest_asyncio.fixture
async def servers() -> AsyncIterator[Servers]:
    made = Servers()
    yield made
    for server in made.made:
        await server.aclose()


@pytest.fixture
def http_server() -> Iterator[HttpServer]:
    server = HttpServer().start()
    yield server
    server.close()


@pytest.fixture(params=["stdio", "http"])
def transport(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def make_server(transport: str, servers: Servers, request: pytest.FixtureRequest) -> Callable[..., MCPToolset]:
    """The test server over the transport of the test's parameter."""
    if transport == "stdio":
        return servers.stdio
    http: HttpServer = request.getfixturevalue("http_server")
    return lambda **options: servers.http(http.url, **options)


def calls(*tool_calls: ScriptedCall, then: str = "Done.") -> ScriptedModel:
    """A model that makes these calls in one reply, then answers."""
    return ScriptedModel([ScriptedReply(tool_calls=tool_calls), ScriptedReply(text=then)])


def tool_messages(model: ScriptedModel, reply: int = 1) -> dict[str, str]:
    """What the model read of each call's answer, by call id, in its `reply`-th request."""
    return {m.tool_call_id: m.content for m in model.calls[reply][0] if m.role == "tool"}


def call_pid(messages: Sequence[ChatMessage], tools: Sequence[ToolSpec]) -> ScriptedReply:
    """A stateless model: call `pid`, then say what it returned."""
    if messages[-1].role == "tool":
        return ScriptedReply(text=f"pid {messages[-1].content}")
    return ScriptedReply(tool_calls=(ScriptedCall("pid"),))


# --- the tools, as the model sees them and as they answer --------------------------------


async def test_the_servers_tools_reach_the_model_with_their_names_descriptions_and_schemas(make_server):
    model = calls(ScriptedCall("echo", {"text": "hi"}))
    result = await Agent(LLMAgent(model=model, tools=[make_server()])).run("Say hi.")
    assert result.text == "Done." and not result.errors
    specs = {spec.name: spec for spec in model.calls[0][1]}
    assert {"echo", "add", "forecast", "fail", "slow", "crash", "pid", "picture", "document"} <= set(specs)
    echo = specs["echo"]
    assert echo.description.startswith("Say the text back.")
    assert echo.parameters["properties"]["text"]["type"] == "string" and echo.parameters["required"] == ["text"]
    assert "title" not in echo.parameters
    (call,) = result.tool_calls
    assert (call.name, call.arguments, call.result, call.error) == ("echo", {"text": "hi"}, "hi", None)
    assert tool_messages(model) == {"call_1_0": "hi"}


async def test_a_traced_call_carries_its_execute_tool_span_in_its_meta_and_an_untraced_one_nothing(make_server):
    # MCP's SEP-414: the W3C trace context rides in the call's `_meta`, so the server's spans
    # join the run's trace; the test server's `trace_context` tool answers what it was given.
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from sentient_assist.runtime.tracing import Tracing
    from sentient_assist.tracing import reset_tracing, set_tracing

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    server = make_server()
    token = set_tracing(Tracing(provider))
    try:
        traced = await Agent(LLMAgent(model=calls(ScriptedCall("trace_context")), tools=[server])).run("Trace.")
    finally:
        reset_tracing(token)
    untraced = await Agent(LLMAgent(model=calls(ScriptedCall("trace_context")), tools=[server])).run("Again.")
    (span,) = [s for s in exporter.get_finished_spans() if s.name == "execute_tool trace_context"]
    version, trace_id, parent_id, _flags = traced.tool_calls[0].result.split("-")
    assert (version, trace_id, parent_id) == ("00", f"{span.context.trace_id:032x}", f"{span.context.span_id:016x}")
    assert untraced.tool_calls[0].result == "none"


async def test_text_structured_content_and_errors_come_back_to_the_model_and_the_user(make_server):
    model = calls(
        ScriptedCall("add", {"a": 2, "b": 3}, id="add"),
        ScriptedCall("forecast", {"city": "Oslo"}, id="forecast"),
        ScriptedCall("fail", {"reason": "a test"}, id="fail"),
        ScriptedCall("add", {"a": "two"}, id="bad"),
    )
    result = await Agent(LLMAgent(model=model, tools=[make_server()])).run("Go.")
    assert result.text == "Done." and not result.errors
    by_id = {call.id: call for call in result.tool_calls}
    assert by_id["add"].result == 5  # the SDK's {"result": 5}, as the function returned it
    assert by_id["forecast"].result == {"city": "Oslo", "temperature_c": 21.5, "sky": "clear"}
    assert by_id["fail"].result is None and "failed on purpose: a test" in by_id["fail"].error
    assert by_id["bad"].result is None and "validation error" in by_id["bad"].error  # the server checks arguments
    seen = tool_messages(model)
    assert seen["add"] == "5"
    assert json.loads(seen["forecast"]) == {"city": "Oslo", "temperature_c": 21.5, "sky": "clear"}
    assert seen["fail"].startswith("error: ") and "failed on purpose: a test" in seen["fail"]
    assert seen["bad"].startswith("error: ")


async def test_pictures_and_resources_are_described_to_the_model_and_sent_whole_to_the_user(make_server):
    model = calls(ScriptedCall("picture", id="picture"), ScriptedCall("document", id="document"))
    result = await Agent(LLMAgent(model=model, tools=[make_server()])).run("Show me.")
    by_id = {call.id: call for call in result.tool_calls}
    picture = by_id["picture"].result
    assert picture["text"] == "a transparent pixel"
    (image,) = picture["content"]
    assert image["type"] == "image" and image["mimeType"] == "image/png" and len(image["data"]) > 40
    document = by_id["document"].result
    assert [block["type"] for block in document["content"]] == ["resource", "resource_link"]
    assert document["content"][0]["resource"] == {"uri": "memo://notes", "mimeType": "text/plain", "text": "buy milk"}
    seen = tool_messages(model)
    assert seen["picture"] == "a transparent pixel\n[image: image/png, 70 bytes, in the tool's result for the user]"
    assert seen["document"] == (
        "the notes are attached\n[resource memo://notes, text/plain]\nbuy milk\n"
        "[a link to the resource memo://archive: archive (older notes)]"
    )
    assert image["data"] not in seen["picture"]


async def test_a_prefix_names_the_tools_and_include_or_exclude_keeps_some(servers):
    prefixed = servers.stdio(tool_prefix="notes", include=["echo", "add", "pid"], exclude=["pid"])
    model = calls(ScriptedCall("notes_add", {"a": 1, "b": 1}))
    result = await Agent(LLMAgent(model=model, tools=[prefixed])).run("Add.")
    assert [spec.name for spec in model.calls[0][1]] == ["notes_echo", "notes_add"]
    (call,) = result.tool_calls
    assert (call.name, call.result) == ("notes_add", 2)
    everything_but = servers.stdio(exclude=["crash", "slow"])
    assert {t.name for t in await everything_but.list_tools()} == {
        "echo",
        "add",
        "forecast",
        "fail",
        "pid",
        "trace_context",
        "picture",
        "document",
    }


async def test_a_name_the_server_does_not_have_in_include_is_refused_at_the_listing(servers):
    agent = LLMAgent(model=ScriptedModel([]), tools=[servers.stdio(include=["echo", "ecko"])])
    with pytest.raises(ValueError, match=r"include= names 'ecko', which the server does not have; it has 'add'"):
        await agent.tools.ready()
    result = await Agent(agent).run("Hi.")  # the run fails: error 500, the reason in the log
    assert [error.code for error in result.errors] == [500]


# --- names that collide ------------------------------------------------------------------


def echo(text: str) -> str:
    """A function tool named as the server's `echo`."""
    return text


async def test_what_is_known_to_collide_is_refused_when_the_agent_is_built(servers):
    server = servers.stdio()
    with pytest.raises(ValueError, match=r"tools\[0\] \(MCPServerStdio\(.*\)\) and tools\[1\] .* are one and the same"):
        LLMAgent(model=ScriptedModel([]), tools=[server, server])
    with pytest.raises(ValueError, match=r"tools\[0\] .* and tools\[2\] .* serve the same tools under the same names"):
        LLMAgent(model=ScriptedModel([]), tools=[servers.stdio(), echo, servers.stdio()])
    with pytest.raises(
        ValueError, match=r"tools\[0\] and tools\[1\] \(MCPServerStdio.*\) both have a tool named 'echo'"
    ):
        LLMAgent(model=ScriptedModel([]), tools=[echo, servers.stdio(include=["echo"])])
    # the same server twice is fine under another prefix, or with tools of its own each
    LLMAgent(model=ScriptedModel([]), tools=[servers.stdio(), servers.stdio(tool_prefix="again")])
    LLMAgent(model=ScriptedModel([]), tools=[servers.stdio(include=["add"]), servers.stdio(include=["echo"])])


async def test_names_that_collide_once_listed_are_refused_at_the_first_run_naming_both(servers, http_server):
    over_http = servers.http(http_server.url)
    agent = LLMAgent(model=ScriptedModel([]), tools=[servers.stdio(), over_http])
    with pytest.raises(ValueError, match="both have a tool named") as raised:
        await agent.tools.ready()
    message = str(raised.value)
    assert message.startswith("tools[0] (MCPServerStdio(") and "and tools[1] (MCPServerStreamableHTTP(" in message
    assert "both have a tool named 'echo'" in message and "tool_prefix=" in message
    with pytest.raises(
        ValueError, match=r"tools\[0\] \(MCPServerStdio.*\) and tools\[1\] both have a tool named 'echo'"
    ):
        await LLMAgent(model=ScriptedModel([]), tools=[servers.stdio(), echo]).tools.ready()
    fine = LLMAgent(model=ScriptedModel([]), tools=[servers.stdio(), servers.http(http_server.url, tool_prefix="web")])
    await fine.tools.ready()
    assert "echo" in fine.tools and "web_echo" in fine.tools


async def test_a_server_tool_named_as_one_the_agent_adds_is_refused(servers):
    with pytest.raises(
        ValueError, match=r"tools\[0\] \(MCPServerStdio.*\) has a tool named 'ask_user', as does ask_user="
    ):
        LLMAgent(
            model=ScriptedModel([]), tools=[servers.stdio(tool_prefix="ask", include=["user"])], ask_user=AskUser()
        )


# --- what every tool gets ----------------------------------------------------------------


async def test_a_call_past_the_tool_timeout_fails_and_the_session_serves_the_next(make_server):
    server = make_server(timeout=0.5)
    model = ScriptedModel(
        [
            ScriptedReply(tool_calls=(ScriptedCall("pid", id="before"),)),
            ScriptedReply(tool_calls=(ScriptedCall("slow", {"seconds": 5}, id="slow"),)),
            ScriptedReply(tool_calls=(ScriptedCall("pid", id="after"),)),
            ScriptedReply(text="Done."),
        ]
    )
    result = await Agent(LLMAgent(model=model, tools=[server])).run("Go.")
    by_id = {call.id: call for call in result.tool_calls}
    assert by_id["slow"].error == "the tool did not finish within 0.5 seconds"
    assert by_id["before"].result == by_id["after"].result  # one session, one server


async def test_a_server_tool_can_wait_for_approval_and_resume(servers):
    server = servers.stdio(approval={"add": Approval(question="Add them?")})
    model = ScriptedModel(
        [
            ScriptedReply(
                tool_calls=(
                    ScriptedCall("echo", {"text": "free"}, id="e"),
                    ScriptedCall("add", {"a": 1, "b": 2}, id="a"),
                )
            ),
            ScriptedReply(text="Added."),
        ]
    )
    agent = Agent(LLMAgent(model=model, tools=[server]))
    paused = await agent.run("Add 1 and 2.")
    pending = paused.interrupt
    assert pending is not None and pending.kind == "interrupt" and pending.question == "Add them?"
    assert pending.tool_call is not None and (pending.tool_call.name, pending.tool_call.arguments) == (
        "add",
        {"a": 1, "b": 2},
    )
    assert [call.name for call in paused.tool_calls] == ["echo"]  # the one without approval ran
    approved = await agent.resume(paused, "yes")
    assert approved.text == "Added."
    (call,) = approved.tool_calls
    assert (call.name, call.result, call.error) == ("add", 3, None)


async def test_usage_limits_bound_a_model_that_keeps_calling_server_tools(servers):
    forever = FunctionModel(lambda messages, tools: ScriptedReply(tool_calls=(ScriptedCall("pid"),)))
    agent = LLMAgent(model=forever, tools=[servers.stdio()], usage_limits=UsageLimits(max_turns=3))
    result = await Agent(agent).run("Loop.")
    assert len(result.tool_calls) == 3 and all(call.error is None for call in result.tool_calls)
    assert [error.code for error in result.errors] == [400] and "after 3 turns" in result.errors[0].message


async def test_an_unknown_tool_is_refused_naming_the_servers_tools_too(servers):
    model = calls(ScriptedCall("ecko", {"text": "hi"}))
    result = await Agent(LLMAgent(model=model, tools=[servers.stdio(include=["echo", "add"])])).run("Hi.")
    (call,) = result.tool_calls
    assert call.error == "there is no tool named 'ecko'; the tools are: echo, add"


# --- the session -------------------------------------------------------------------------


async def test_fifty_concurrent_runs_share_one_session_and_every_call_is_answered(servers):
    server = servers.stdio()
    agent = Agent(LLMAgent(model=FunctionModel(call_pid), tools=[server]))
    results = await asyncio.gather(*(agent.run(f"Run {number}.") for number in range(50)))
    assert all(not result.errors and len(result.tool_calls) == 1 for result in results)
    pids = {result.tool_calls[0].result for result in results}
    assert len(pids) == 1 and all(isinstance(pid, int) for pid in pids)
    assert processes(os.getpid()) == list(pids)  # one server process, this one


async def test_a_run_cancelled_mid_call_leaves_the_session_usable_and_logs_no_cancel_scope_error(
    make_server, caplog: pytest.LogCaptureFixture, tmp_path: Path
):
    caplog.set_level(logging.DEBUG)
    server = make_server()
    started = tmp_path / "started"
    slow = ScriptedModel([ScriptedReply(tool_calls=(ScriptedCall("slow", {"seconds": 30, "started": str(started)}),))])
    agent = LLMAgent(model=slow, tools=[server])
    before = (await Agent(LLMAgent(model=FunctionModel(call_pid), tools=[server])).run("pid")).tool_calls[0].result
    async with Agent(agent).stream("Wait.") as events:
        async for event in events:
            if event.kind == "tool_call":
                assert await until(started.exists, 10)  # the call is in flight on the server
                events.cancel()
    after = (await Agent(LLMAgent(model=FunctionModel(call_pid), tools=[server])).run("pid")).tool_calls[0].result
    assert before == after
    # anyio's complaints when a cancel scope is left in another task than the one that entered it
    wrong = ("different task", "non-innermost", "unhandled errors in a taskgroup")
    noise = [
        r for r in caplog.records if r.levelno >= logging.WARNING or any(w in r.getMessage().lower() for w in wrong)
    ]
    assert noise == []


async def test_a_server_that_crashes_mid_call_fails_that_call_and_the_next_call_opens_another(servers):
    server = servers.stdio()
    model = ScriptedModel(
        [
            ScriptedReply(tool_calls=(ScriptedCall("pid", id="before"),)),
            ScriptedReply(tool_calls=(ScriptedCall("crash", id="crash"),)),
            ScriptedReply(tool_calls=(ScriptedCall("pid", id="after"),)),
            ScriptedReply(text="Done."),
        ]
    )
    result = await Agent(LLMAgent(model=model, tools=[server])).run("Go.")
    by_id = {call.id: call for call in result.tool_calls}
    assert by_id["crash"].error == "the MCP server's connection closed during the call (it may or may not have run)"
    assert isinstance(by_id["after"].result, int) and by_id["after"].result != by_id["before"].result
    assert not alive(by_id["before"].result) and processes(os.getpid()) == [by_id["after"].result]


async def test_a_server_killed_between_calls_is_started_again_by_the_next_call(servers, llm_log):
    server = servers.stdio()
    agent = Agent(LLMAgent(model=FunctionModel(call_pid), tools=[server]))
    first = (await agent.run("pid")).tool_calls[0].result
    os.kill(first, signal.SIGKILL)
    # Between the calls: the toolset has seen its session close (a call sent before it has may
    # or may not have run, and is not sent again: the next test's subject).
    assert await until(lambda: any("closed the session" in record.getMessage() for record in llm_log), 5)
    second = await agent.run("pid")
    assert not second.errors and second.tool_calls[0].error is None
    assert second.tool_calls[0].result != first and processes(os.getpid()) == [second.tool_calls[0].result]


async def test_an_http_server_that_restarts_or_crashes_is_reconnected_to(servers, http_server):
    server = servers.http(http_server.url)
    agent = Agent(LLMAgent(model=FunctionModel(call_pid), tools=[server]))
    first = (await agent.run("pid")).tool_calls[0].result
    http_server.stop()
    http_server.start()  # another process: the session (and its connection) is gone
    second = (await agent.run("pid")).tool_calls[0]
    assert second.error is None and second.result not in (None, first)
    crashing = calls(ScriptedCall("crash"))
    crashed = await Agent(LLMAgent(model=crashing, tools=[server])).run("Crash.")
    assert crashed.tool_calls[0].error == (
        "the MCP server's connection closed during the call (it may or may not have run)"
    )
    down = (await agent.run("pid")).tool_calls[0]  # nobody listens on the port now
    assert down.error == "the tool's MCP server could not be reached"
    http_server.start()
    third = (await agent.run("pid")).tool_calls[0]
    assert third.error is None and third.result not in (None, first, second.result)


async def test_a_legacy_http_server_that_restarts_forgets_the_session_and_the_call_is_sent_again(
    servers, caplog: pytest.LogCaptureFixture
):
    caplog.set_level(logging.INFO, logger="sentient_assist.llm.mcp")
    legacy = HttpServer("--legacy").start()
    try:
        server = servers.http(legacy.url)
        agent = Agent(LLMAgent(model=FunctionModel(call_pid), tools=[server]))
        first = (await agent.run("pid")).tool_calls[0].result
        assert server._connection is not None and server._connection.client is not None
        assert server._connection.client.protocol_version == "2025-11-25"  # initialize, and a session id
        legacy.stop()
        legacy.start()
        second = (await agent.run("pid")).tool_calls[0]
        assert second.error is None and second.result not in (None, first)
        assert any("calling pid again on a new one" in r.getMessage() for r in caplog.records)
    finally:
        await server.aclose()  # before its server stops: the session is ended with a DELETE
        legacy.close()


async def test_a_server_that_will_not_start_fails_the_first_run_saying_why(servers, caplog):
    missing = MCPServerStdio("no-such-mcp-server")
    servers.made.append(missing)
    with pytest.raises(
        ConnectionError,
        match=r"MCPServerStdio\('no-such-mcp-server'\) could not be opened: "
        r"FileNotFoundError: 'no-such-mcp-server' is not on PATH",
    ):
        await missing.list_tools()
    result = await Agent(LLMAgent(model=ScriptedModel([]), tools=[missing])).run("Hi.")
    assert [error.code for error in result.errors] == [500]


async def test_async_with_opens_the_session_and_closes_it(servers):
    server = servers.stdio()
    async with server as opened:
        assert opened is server and server.listed is not None
        (pid,) = processes(os.getpid())
    assert not alive(pid) and processes(os.getpid()) == []


async def test_the_reference_time_server_answers_the_time_in_a_named_zone(servers):
    model = calls(ScriptedCall("get_current_time", {"timezone": "Asia/Tokyo"}), then="It is late in Tokyo.")
    result = await Agent(LLMAgent(model=model, tools=[servers.time()])).run("What time is it in Tokyo?")
    assert result.text == "It is late in Tokyo." and not result.errors
    (call,) = result.tool_calls
    assert call.error is None and call.result["timezone"] == "Asia/Tokyo"
    told = datetime.fromisoformat(call.result["datetime"])
    assert told.utcoffset() == timedelta(hours=9)
    assert abs(told - datetime.now(UTC)) < timedelta(minutes=5)
    assert json.loads(tool_messages(model)["call_1_0"])["timezone"] == "Asia/Tokyo"
    specs = {spec.name for spec in model.calls[0][1]}
    assert specs == {"get_current_time", "convert_time"}


# --- without the extra, and for authors ----------------------------------------------------


def _python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)


def test_without_the_extra_a_server_cannot_be_made_and_the_error_names_the_extra():
    done = _python(
        "import sys\n"
        "sys.modules['mcp'] = None\n"
        "from sentient_assist.llm import MCPServerStdio\n"
        "try:\n"
        "    MCPServerStdio('mcp-server-time')\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    assert done.returncode == 0, done.stderr
    assert "pip install 'sentient-assist[mcp]'" in done.stdout


def test_an_agent_with_mcp_servers_imports_the_sdk_only_when_they_are_used():
    done = _python(
        "import sys\n"
        "from sentient_assist import LLMAgent\n"
        "from sentient_assist.llm import MCPServerStdio, MCPServerStreamableHTTP\n"
        "from sentient_assist.testing import ScriptedModel\n"
        "LLMAgent(model=ScriptedModel([]), tools=[MCPServerStdio('x'), MCPServerStreamableHTTP('http://h/mcp')])\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in {'mcp', 'mcp_types', 'httpx2', 'uvicorn'}))\n"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


# --- through the service ---------------------------------------------------------------------


def _assist(url: str, prompt: str) -> list[tuple[str, dict[str, Any]]]:
    with httpx.stream("POST", url + "/assist", json=new_body(prompt), timeout=30) as response:
        stream = read_response(response)
    assert stream.status == 200
    return [(frame.event_name, frame.json) for frame in stream.frames]


@pytest.mark.parametrize("stop", ["SIGTERM", "SIGKILL"])
def test_the_service_calls_a_stdio_server_and_leaves_no_process_behind(stop):
    env = {"ASSIST_AGENT": "tests.server.mcp_agents:agent", "ASSIST_LOG_LEVEL": "warning"}
    with running_server(env) as service:
        events = _assist(service.url, "pid")
        named = {name: event for name, event in events}
        assert named["TOOL_CALL"]["content"] == {"id": "call_1_0", "name": "pid", "arguments": {}}
        result = named["TOOL_RESULT"]["content"]
        assert (result["name"], result["error"]) == ("pid", None)
        pid = result["result"]
        assert alive(pid) and _assist(service.url, "pid")[-1] is not None  # the same process, again
        again = {name: event for name, event in _assist(service.url, "pid")}
        assert again["TOOL_RESULT"]["content"]["result"] == pid
        service.process.send_signal(getattr(signal, stop))
        service.process.wait(timeout=15)
        log = service.log()
    assert wait_until(lambda: not alive(pid), 5), log
    if stop == "SIGTERM":
        assert "Traceback" not in log and "cancel scope" not in log, log


def test_with_workers_each_worker_has_its_session_and_none_outlives_the_service():
    env = {"ASSIST_AGENT": "tests.server.mcp_agents:agent", "ASSIST_LOG_LEVEL": "warning"}
    with running_server(env, ["--workers", "2"]) as service:
        pids = set()
        for _ in range(6):
            named = {name: event for name, event in _assist(service.url, "pid")}
            pids.add(named["TOOL_RESULT"]["content"]["result"])
        assert 1 <= len(pids) <= 2 and all(alive(pid) for pid in pids)
        service.process.terminate()
        service.process.wait(timeout=20)
    assert wait_until(lambda: not any(alive(pid) for pid in pids), 5)


def _pid_when_up(url: str, timeout: float = 30) -> int:
    """The server's PID through the service, once it answers (it may be restarting)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            named = dict(_assist(url, "pid"))
            return int(named["TOOL_RESULT"]["content"]["result"])
        except (httpx.HTTPError, AssertionError, KeyError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def test_with_reload_a_restart_stops_the_old_server_and_the_new_worker_starts_its_own(tmp_path):
    env = {
        "ASSIST_AGENT": "tests.server.mcp_agents:agent",
        "ASSIST_LOG_LEVEL": "warning",
        "ASSIST_AGENTS_DIR": str(tmp_path),  # watched: a file written there restarts the worker
    }
    with running_server(env, ["--reload"]) as service:
        first = _pid_when_up(service.url)
        (tmp_path / "edited.py").write_text("# an edit\n")
        assert wait_until(lambda: not alive(first), 20), service.log()
        second = _pid_when_up(service.url)
        assert second != first
        service.process.terminate()
        service.process.wait(timeout=20)
    assert wait_until(lambda: not alive(second), 5)
