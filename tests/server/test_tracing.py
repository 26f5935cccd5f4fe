"""OpenTelemetry traces of the real service, exported over OTLP/HTTP to a real receiver started
here (tests/support/otlp_receiver.py, decoding with opentelemetry-proto): the span tree of a run,
its names, attributes and parentage; one trace across two service processes; spans that end with
a status when the client leaves, the time limit cuts the run or SIGTERM's grace runs out; the
server spans of the OpenAI and MCP faces; nothing secret in any exported byte."""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys

import httpx
import pytest

from sentient_assist import Agent
from tests.server.test_stream_guarantees import assert_well_ended
from tests.support.openai_server import error_reply, stream_reply
from tests.support.otlp_receiver import OTLPReceiver, ReceivedSpan, running_receiver
from tests.support.server import ALL_FACES, ROOT, clean_env, running_server
from tests.support.sse import new_body, read_stream
from tests.support.waiting import wait_until

pytestmark = pytest.mark.timeout(60)

SECRET_KEY = "sk-trace-0123456789-secret"
SERVICE_KEY = "assist-key-tracing-0123456789"
ERROR = 2
OK = 1


@pytest.fixture(scope="module")
def receiver():
    yield from running_receiver()


def otel_env(receiver: OTLPReceiver, service: str = "assist-test") -> dict[str, str]:
    return {
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
        "OTEL_BSP_SCHEDULE_DELAY": "50",
        "OTEL_SERVICE_NAME": service,
        "OTEL_RESOURCE_ATTRIBUTES": "deployment.environment.name=test",
    }


@pytest.fixture(scope="module")
def traced_assistant(model_server, receiver):
    env = {
        "ASSIST_AGENT": "assistant",
        "MODEL_BASE_URL": model_server.base_url,
        "MODEL_API_KEY": SECRET_KEY,
        "MODEL_NAME": "test-model",
        "MODEL_TIMEOUT": "5",
        "ASSIST_API_KEYS": SERVICE_KEY,
        **otel_env(receiver),
    }
    with running_server(env) as server:
        yield server


def by_name(spans: list[ReceivedSpan], prefix: str) -> list[ReceivedSpan]:
    return [s for s in spans if s.name.startswith(prefix)]


def one_trace(spans: list[ReceivedSpan], trace_id: str) -> list[ReceivedSpan]:
    return [s for s in spans if s.trace_id == trace_id]


def has_span(trace_id: str, name: str):
    return lambda spans: any(s.trace_id == trace_id and s.name == name for s in spans)


def run_under(trace_id: str, server_span: str):
    """Whether a run's invoke_agent and the server span it is under have both come (a face's
    request may be one of several of its trace: MCP lists its tools first)."""

    def received(spans: list[ReceivedSpan]) -> bool:
        servers = {s.span_id for s in spans if s.trace_id == trace_id and s.name == server_span}
        return any(s.name.startswith("invoke_agent ") and s.parent_span_id in servers for s in spans)

    return received


AUTH = {"Authorization": f"Bearer {SERVICE_KEY}"}


def test_an_assist_run_with_a_tool_is_one_tree_under_the_incoming_traceparent(traced_assistant, model, receiver):
    model.enqueue(
        stream_reply(
            text="Let me check.", tool_calls=[("call_a", "calculate", {"expression": "6 * 7"})], usage=(100, 20)
        ),
        stream_reply(text="6 * 7 is 42.", usage=(150, 15)),
    )
    trace_id, parent_id = secrets.token_hex(16), secrets.token_hex(8)
    headers = {**AUTH, "traceparent": f"00-{trace_id}-{parent_id}-01", "X-Request-ID": "req-trace-1"}
    stream = read_stream(traced_assistant.url, new_body("What is 6 * 7?"), headers=headers, timeout=20)
    assert_well_ended(stream)

    spans = one_trace(receiver.wait_for(has_span(trace_id, "POST /assist")), trace_id)
    (server,) = by_name(spans, "POST /assist")
    (agent,) = by_name(spans, "invoke_agent ")
    chats = sorted(by_name(spans, "chat "), key=lambda s: s.start)
    (tool,) = by_name(spans, "execute_tool ")
    assert len(spans) == 5, [s.name for s in spans]

    # The incoming traceparent is the server span's parent; the rest hang below it.
    assert server.parent_span_id == parent_id and server.kind == 2  # SERVER
    assert server.attributes["http.route"] == "/assist"
    assert server.attributes["http.response.status_code"] == 200
    assert server.attributes["sentient.request_id"] == "req-trace-1"
    assert server.service == "assist-test"

    assert agent.name == "invoke_agent assistant" and agent.parent_span_id == server.span_id
    assert agent.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert agent.attributes["gen_ai.agent.name"] == "assistant"
    assert agent.attributes["sentient.run.outcome"] == "completed"
    assert agent.status_code == OK

    assert [c.name for c in chats] == ["chat test-model", "chat test-model"]
    for chat, (tokens_in, tokens_out), reasons in zip(
        chats, [(100, 20), (150, 15)], [["tool_calls"], ["stop"]], strict=True
    ):
        assert chat.parent_span_id == agent.span_id and chat.kind == 3  # CLIENT
        attrs = chat.attributes
        assert attrs["gen_ai.operation.name"] == "chat"
        assert attrs["gen_ai.provider.name"] == "openai"
        assert attrs["gen_ai.request.model"] == "test-model"
        assert attrs["gen_ai.response.model"] == "test-model"
        assert (attrs["gen_ai.usage.input_tokens"], attrs["gen_ai.usage.output_tokens"]) == (tokens_in, tokens_out)
        assert attrs["gen_ai.response.finish_reasons"] == reasons
        assert attrs["server.address"] == "127.0.0.1"
        assert [name for name, _ in chat.events] == ["gen_ai.first_token"]
        assert chat.status_code == OK
        assert "gen_ai.input.messages" not in attrs  # content is off by default

    assert tool.name == "execute_tool calculate" and tool.parent_span_id == agent.span_id
    assert tool.attributes["gen_ai.tool.name"] == "calculate"
    assert tool.attributes["gen_ai.operation.name"] == "execute_tool"
    assert "gen_ai.tool.call.arguments" not in tool.attributes
    assert chats[0].end <= tool.start and tool.end <= chats[1].start

    # The provider's requests carry their chat span's traceparent.
    sent = [r.headers.get("traceparent") for r in model.requests]
    assert sent == [f"00-{trace_id}-{chat.span_id}-01" for chat in chats]

    # Never a key, an Authorization header's value, or the word Bearer, in any exported byte.
    exported = receiver.all_bytes()
    for secret in (SECRET_KEY, SERVICE_KEY, "Bearer", "authorization"):
        assert secret.encode() not in exported


def test_a_provider_failure_is_an_error_span_and_its_log_line_carries_the_trace(traced_assistant, model, receiver):
    model.enqueue(error_reply(400, f"bad request; your key {SECRET_KEY} is wrong"))
    trace_id = secrets.token_hex(16)
    headers = {**AUTH, "traceparent": f"00-{trace_id}-{secrets.token_hex(8)}-01"}
    stream = read_stream(traced_assistant.url, new_body("Hello?"), headers=headers, timeout=20)
    assert "error" in stream.names()
    spans = one_trace(receiver.wait_for(has_span(trace_id, "POST /assist")), trace_id)
    (chat,) = by_name(spans, "chat ")
    (agent,) = by_name(spans, "invoke_agent ")
    assert chat.status_code == ERROR and chat.attributes["error.type"] == "400"
    assert SECRET_KEY.encode() not in receiver.all_bytes()
    lines = [line for line in traced_assistant.log().splitlines() if "model provider failed" in line]
    assert lines and f"trace_id={trace_id}" in lines[-1]
    assert any(f"span_id={s.span_id}" in lines[-1] for s in (chat, agent))


def test_a_failing_tool_call_sets_error_type_and_status(traced_assistant, model, receiver):
    model.enqueue(
        stream_reply(tool_calls=[("call_b", "calculate", {"expression": "1 / 0"})]),
        stream_reply(text="It cannot be done."),
    )
    trace_id = secrets.token_hex(16)
    headers = {**AUTH, "traceparent": f"00-{trace_id}-{secrets.token_hex(8)}-01"}
    assert_well_ended(read_stream(traced_assistant.url, new_body("1 / 0?"), headers=headers, timeout=20))
    spans = one_trace(receiver.wait_for(has_span(trace_id, "POST /assist")), trace_id)
    (tool,) = by_name(spans, "execute_tool ")
    assert tool.status_code == ERROR and tool.attributes["error.type"]
    assert "1 / 0" not in tool.status_message  # content stays out


def test_a_client_leaving_mid_stream_ends_every_span_with_a_status(traced_assistant, model, receiver):
    model.enqueue(stream_reply(text="one two three four five six seven eight nine ten", delay=0.3))
    trace_id = secrets.token_hex(16)
    headers = {**AUTH, "traceparent": f"00-{trace_id}-{secrets.token_hex(8)}-01"}
    with (
        httpx.Client(timeout=10) as client,
        client.stream("POST", traced_assistant.url + "/assist", json=new_body("Count."), headers=headers) as response,
    ):
        for chunk in response.iter_raw():
            if b"FINAL_RESPONSE" in chunk:
                break  # leave after the first words
    spans = one_trace(receiver.wait_for(has_span(trace_id, "POST /assist")), trace_id)
    (agent,) = by_name(spans, "invoke_agent ")
    spans = one_trace(receiver.wait_for(has_span(trace_id, "chat test-model")), trace_id)
    (chat,) = by_name(spans, "chat ")
    assert agent.status_code == ERROR and agent.attributes["sentient.run.outcome"] == "disconnected"
    assert agent.attributes["error.type"] == "disconnected"
    assert chat.status_code == ERROR and chat.attributes["error.type"] in ("cancelled", "closed")
    assert chat.parent_span_id == agent.span_id
    assert wait_until(lambda: traced_assistant.metric("assist_streams_open") == 0, 5)  # the run is over
    assert "Failed to detach context" not in traced_assistant.log()


def test_a_run_cut_at_the_time_limit_ends_its_spans_saying_so(model_server, model, receiver):
    model.enqueue(stream_reply(text="never finished", stall_after=2, stall_seconds=10))
    env = {
        "ASSIST_AGENT": "assistant",
        "MODEL_BASE_URL": model_server.base_url,
        "MODEL_NAME": "test-model",
        "MODEL_TIMEOUT": "20",
        "ASSIST_REQUEST_TIMEOUT": "1",
        **otel_env(receiver, "assist-time-limit"),
    }
    trace_id = secrets.token_hex(16)
    with running_server(env) as server:
        headers = {"traceparent": f"00-{trace_id}-{secrets.token_hex(8)}-01"}
        stream = read_stream(server.url, new_body("Talk."), headers=headers, timeout=20)
        (error,) = [e["content"] for e in stream.events if e["event_name"] == "error"]
        assert error["error_code"] == 504 and stream.names()[-1] == "done"
        spans = one_trace(receiver.wait_for(has_span(trace_id, "POST /assist")), trace_id)
        (agent,) = by_name(spans, "invoke_agent ")
        spans = one_trace(receiver.wait_for(has_span(trace_id, "chat test-model")), trace_id)
        (chat,) = by_name(spans, "chat ")
        assert agent.status_code == ERROR and agent.attributes["sentient.run.outcome"] == "time_limit"
        assert chat.status_code == ERROR and chat.attributes["error.type"] == "cancelled"
        assert "Failed to detach context" not in server.log()


def test_no_pause_token_in_any_exported_byte(receiver):
    env = {"ASSIST_AGENT": "tests.support.agents:asking_llm", **otel_env(receiver, "assist-asking")}
    with running_server(env) as server:
        paused = Agent(server.url + "/assist").run_sync("ask") if hasattr(Agent, "run_sync") else None
        if paused is None:
            import asyncio

            paused = asyncio.run(Agent(server.url + "/assist").run("ask"))
        assert paused.interrupt is not None and paused.interrupt.token
        receiver.wait_for(lambda spans: any(s.service == "assist-asking" and s.name == "POST /assist" for s in spans))
        asking = [s for s in receiver.spans if s.service == "assist-asking"]
        (agent,) = by_name(asking, "invoke_agent ")
        assert "sentient.pause" in [name for name, _ in agent.events]
        assert paused.interrupt.token.encode() not in receiver.all_bytes()


def test_a_host_and_its_remote_specialist_in_two_processes_share_one_trace(receiver):
    with running_server(
        {"ASSIST_AGENT": "tests.orchestration.host_agents:far_speaker", **otel_env(receiver, "far")}
    ) as far:
        env = {
            "ASSIST_AGENT": "tests.orchestration.host_agents:host_of_far_speaker",
            "SPECIALIST_URL": far.url + "/assist",
            **otel_env(receiver, "host"),
        }
        with running_server(env) as host:
            trace_id = secrets.token_hex(16)
            headers = {"traceparent": f"00-{trace_id}-{secrets.token_hex(8)}-01"}
            stream = read_stream(host.url, new_body("Speak from afar."), headers=headers, timeout=20)
            assert_well_ended(stream)
            assert "from far away" in "".join(
                e["content"] for e in stream.events if e["event_name"] == "FINAL_RESPONSE" and e["content"]
            )
            done = lambda spans: sum(s.trace_id == trace_id and s.name == "POST /assist" for s in spans) == 2  # noqa: E731
            spans = one_trace(receiver.wait_for(done), trace_id)
    host_server = next(s for s in spans if s.service == "host" and s.name == "POST /assist")
    host_agent = next(s for s in spans if s.service == "host" and s.name.startswith("invoke_agent "))
    far_server = next(s for s in spans if s.service == "far" and s.name == "POST /assist")
    far_agent = next(s for s in spans if s.service == "far" and s.name.startswith("invoke_agent "))
    assert host_agent.parent_span_id == host_server.span_id
    assert far_server.parent_span_id == host_agent.span_id  # the remote call carried the host's traceparent
    assert far_agent.parent_span_id == far_server.span_id and far_agent.name == "invoke_agent far_alpha"
    assert ("sentient.handoff", {"sentient.handoff.to_agent": "far_alpha"}) in host_agent.events


def test_a_receiver_that_is_down_does_not_break_a_stream():
    with socket.socket() as closed:  # a port nothing listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    env = {
        "ASSIST_AGENT": "echo",
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}",
        "OTEL_BSP_SCHEDULE_DELAY": "10",
        "OTEL_EXPORTER_OTLP_TIMEOUT": "1",
    }
    with running_server(env) as server:
        for _ in range(20):
            assert_well_ended(read_stream(server.url, new_body("hello"), timeout=10))


def test_tracing_asked_for_without_the_extra_fails_at_startup_naming_it(monkeypatch):
    from sentient_assist.runtime.errors import SettingsError
    from sentient_assist.server.tracing import tracing_for

    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
    for module in ("opentelemetry.sdk.trace", "opentelemetry.exporter.otlp.proto.http.trace_exporter"):
        monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(SettingsError, match=r"pip install 'sentient-assist\[otel\]'"):
        tracing_for()


def test_with_nothing_configured_the_service_loads_no_opentelemetry_sdk():
    code = (
        "import sys\n"
        "from sentient_assist.server.app import create_app\n"
        "from sentient_assist.agents.echo import EchoAgent\n"
        "app = create_app(agent=EchoAgent())\n"
        "assert app.state.tracing is None\n"
        "loaded = [m for m in sys.modules if m.startswith(('opentelemetry.sdk', 'sentient_assist.runtime.tracing'))]\n"
        "print(sorted(loaded))"
    )
    env = {k: v for k, v in clean_env().items() if not k.startswith("OTEL_")}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_an_app_given_its_own_tracer_provider_traces_without_any_environment(monkeypatch):
    from fastapi.testclient import TestClient
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from sentient_assist.agents.echo import EchoAgent
    from sentient_assist.server.app import create_app

    for name in list(os.environ):
        if name.startswith(("OTEL_", "ASSIST_")):
            monkeypatch.delenv(name)
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    app = create_app(agent=EchoAgent(), tracer_provider=provider)
    with TestClient(app) as client:
        response = client.post("/assist", json=new_body("hi"))
        assert response.status_code == 200
    names = sorted(span.name for span in exporter.get_finished_spans())
    assert names == ["POST /assist", f"invoke_agent {EchoAgent().name}"]


def test_content_is_recorded_only_when_asked_and_bounded(monkeypatch):
    from fastapi.testclient import TestClient
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from sentient_assist.agents.echo import EchoAgent
    from sentient_assist.server.app import create_app

    prompt = "tell me " * 2000  # 16,000 characters
    seen = []
    for capture in ("", "true"):
        monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", capture)
        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        with TestClient(create_app(agent=EchoAgent(), tracer_provider=provider)) as client:
            assert client.post("/assist", json=new_body(prompt)).status_code == 200
        (agent,) = [s for s in exporter.get_finished_spans() if s.name.startswith("invoke_agent")]
        seen.append((agent.attributes or {}).get("gen_ai.input.messages"))
    assert seen[0] is None
    assert seen[1] is not None and "tell me" in seen[1] and len(seen[1]) < 4500


def test_add_routes_with_a_tracer_provider_traces_the_runs_under_the_apps_own_span(monkeypatch):
    from fastapi import FastAPI
    from fastapi.testclient import TestClient
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from sentient_assist.agents.echo import EchoAgent
    from sentient_assist.server.app import add_routes

    for name in list(os.environ):
        if name.startswith(("OTEL_", "ASSIST_")):
            monkeypatch.delenv(name)
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    app = FastAPI()
    add_routes(app, EchoAgent(), path="/echo", tracer_provider=provider)
    with TestClient(app) as client:
        assert client.post("/echo/assist", json=new_body("hi")).status_code == 200
    (span,) = exporter.get_finished_spans()
    assert span.name == f"invoke_agent {EchoAgent().name}"


def test_a_hosts_in_process_specialists_are_invoke_agent_children_of_the_host(receiver):
    env = {"ASSIST_AGENT": "tests.orchestration.host_agents:two_handoffs_host", **otel_env(receiver, "two-host")}
    with running_server(env) as server:
        trace_id = secrets.token_hex(16)
        headers = {"traceparent": f"00-{trace_id}-{secrets.token_hex(8)}-01"}
        assert_well_ended(read_stream(server.url, new_body("Both of you."), headers=headers, timeout=20))
        spans = one_trace(receiver.wait_for(has_span(trace_id, "POST /assist")), trace_id)
    (server_span,) = by_name(spans, "POST /assist")
    agents = by_name(spans, "invoke_agent ")
    (host,) = [s for s in agents if s.parent_span_id == server_span.span_id]
    children = sorted(s.name for s in agents if s.parent_span_id == host.span_id)
    assert children == ["invoke_agent alpha", "invoke_agent beta"], [(s.name, s.parent_span_id) for s in agents]
    handed = [attrs["sentient.handoff.to_agent"] for name, attrs in host.events if name == "sentient.handoff"]
    assert handed == ["alpha", "beta"]
    assert all(s.status_code == OK for s in agents)


def test_sigterm_past_the_grace_ends_the_run_s_spans_saying_shutdown(receiver):
    # The showcase's "slow" answer outlives a grace of 1 s: the run is ended by the shutdown,
    # its spans end saying so, and they are exported before the process exits.
    from tests.server.test_shutdown import assert_exited_cleanly, stream_and_stop

    env = {"ASSIST_SHUTDOWN_GRACE": "1", **otel_env(receiver, "assist-sigterm")}
    with running_server(env) as server:
        stream, _ = stream_and_stop(server, "slow")
        assert_well_ended(stream)
        assert stream.events[-2]["content"]["error_code"] == 503
        assert_exited_cleanly(server)
        assert "Failed to detach context" not in server.log()
    spans = receiver.wait_for(
        lambda spans: any(s.service == "assist-sigterm" and s.name == "POST /assist" for s in spans)
    )
    mine = [s for s in spans if s.service == "assist-sigterm"]
    (agent,) = by_name(mine, "invoke_agent ")
    (http,) = by_name(mine, "POST /assist")
    assert agent.status_code == ERROR and agent.attributes["sentient.run.outcome"] == "shutdown"
    assert agent.parent_span_id == http.span_id and http.attributes["http.response.status_code"] == 200


def test_the_openai_mcp_agui_and_a2a_faces_have_their_server_spans_with_the_run_under_them(receiver):
    import asyncio

    import httpx2
    import openai
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    env = {"ASSIST_AGENT": "echo", **otel_env(receiver, "assist-faces"), **ALL_FACES}
    with running_server(env) as server:
        chat_trace, mcp_trace = secrets.token_hex(16), secrets.token_hex(16)
        client = openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0)
        answer = client.chat.completions.create(
            model="echo",
            messages=[{"role": "user", "content": "hello"}],
            extra_headers={"traceparent": f"00-{chat_trace}-{secrets.token_hex(8)}-01"},
        )
        assert "hello" in (answer.choices[0].message.content or "")

        async def call_over_mcp() -> None:
            headers = {"traceparent": f"00-{mcp_trace}-{secrets.token_hex(8)}-01"}
            async with (
                httpx2.AsyncClient(headers=headers, timeout=20) as http,
                Client(streamable_http_client(server.url + "/mcp", http_client=http)) as mcp_client,
            ):
                (tool,) = (await mcp_client.list_tools()).tools
                result = await mcp_client.call_tool(tool.name, {"prompt": "over mcp"})
                assert not result.is_error

        asyncio.run(call_over_mcp())
        # AG-UI and A2A, as their clients send them (their own clients are tested on their pages).
        agui_trace, a2a_trace = secrets.token_hex(16), secrets.token_hex(16)
        run_input = {"threadId": "t", "runId": "r", "messages": [{"id": "m", "role": "user", "content": "agui"}]}
        run_input |= {"tools": [], "context": [], "state": {}, "forwardedProps": {}}
        send = {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "a2a"}]}}
        with httpx.Client(base_url=server.url, timeout=20) as http:
            agui = http.post(
                "/agui", json=run_input, headers={"traceparent": f"00-{agui_trace}-{secrets.token_hex(8)}-01"}
            )
            assert agui.status_code == 200 and "RUN_FINISHED" in agui.text
            a2a = http.post(
                "/a2a",
                json={"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": send},
                headers={"traceparent": f"00-{a2a_trace}-{secrets.token_hex(8)}-01", "A2A-Version": "1.0"},
            )
            assert a2a.status_code == 200 and "result" in a2a.json()
        chat_spans = one_trace(receiver.wait_for(run_under(chat_trace, "POST /v1/chat/completions")), chat_trace)
        mcp_spans = one_trace(receiver.wait_for(run_under(mcp_trace, "POST /mcp")), mcp_trace)
        agui_spans = one_trace(receiver.wait_for(run_under(agui_trace, "POST /agui")), agui_trace)
        a2a_spans = one_trace(receiver.wait_for(run_under(a2a_trace, "POST /a2a")), a2a_trace)
    faces = [(chat_spans, "/v1/chat/completions"), (mcp_spans, "/mcp"), (agui_spans, "/agui"), (a2a_spans, "/a2a")]
    for spans, route in faces:
        servers = by_name(spans, f"POST {route}")
        assert all(s.attributes["http.route"] == route and s.status_code != ERROR for s in servers)
        assert any(
            s.attributes["http.response.status_code"] == 200 and s.attributes.get("sentient.request_id")
            for s in servers
        )
        agents = by_name(spans, "invoke_agent ")
        assert len(agents) == 1 and agents[0].status_code == OK
        assert agents[0].parent_span_id in {s.span_id for s in servers}


def test_spans_still_queued_at_sigterm_are_exported_before_the_process_exits(receiver):
    # The batch processor's schedule is long here (as its default 5 s is, against a request of
    # milliseconds): the spans are still queued when SIGTERM comes, and uvicorn ends its
    # process by the signal, so only the app's shutdown can export them.
    env = {**otel_env(receiver, "assist-flush"), "OTEL_BSP_SCHEDULE_DELAY": "600000"}
    with running_server(env) as server:
        assert_well_ended(read_stream(server.url, new_body("hello"), timeout=20))
        server.process.send_signal(signal.SIGTERM)
        assert server.process.wait(timeout=15) in (0, -signal.SIGTERM)
    spans = receiver.wait_for(
        lambda spans: any(s.service == "assist-flush" and s.name == "POST /assist" for s in spans)
    )
    assert len(by_name([s for s in spans if s.service == "assist-flush"], "invoke_agent ")) == 1


def test_a_host_handing_off_to_an_a2a_agent_of_another_process_shares_its_trace(receiver):
    with running_server({"ASSIST_AGENT": "echo", **otel_env(receiver, "a2a-far"), **ALL_FACES}) as far:
        env = {
            "ASSIST_AGENT": "tests.server.a2a_agents:a2a_host",
            "A2A_REMOTE_URL": far.url,
            **otel_env(receiver, "a2a-host"),
        }
        with running_server(env) as host:
            trace_id = secrets.token_hex(16)
            headers = {"traceparent": f"00-{trace_id}-{secrets.token_hex(8)}-01"}
            assert_well_ended(read_stream(host.url, new_body("Over A2A."), headers=headers, timeout=30))
            wanted = ("POST /a2a", "invoke_agent echo", "invoke_agent remote", "POST /assist")
            everything = lambda spans: all(has_span(trace_id, name)(spans) for name in wanted)  # noqa: E731
            spans = one_trace(receiver.wait_for(everything), trace_id)
    remote = next(s for s in spans if s.service == "a2a-host" and s.name == "invoke_agent remote")
    far_server = next(s for s in spans if s.service == "a2a-far" and s.name == "POST /a2a")
    far_agent = next(s for s in spans if s.service == "a2a-far" and s.name == "invoke_agent echo")
    assert far_server.parent_span_id == remote.span_id  # the A2A call carried the specialist's traceparent
    assert far_agent.parent_span_id == far_server.span_id
