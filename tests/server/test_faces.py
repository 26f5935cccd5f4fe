"""Which faces are served (ASSIST_FACES), and the contract a face is written against: a tiny
face of the tests' own (tests/server/tiny_face.py), mounted on a service, is admitted, run, cut
off and logged by the one admitted route as every face of the service is."""

from __future__ import annotations

import logging
import socket
import subprocess
import sys
from collections.abc import Iterator

import httpx
import pytest
from fastapi import FastAPI

from sentient_assist import AbstractAgent, create_app
from sentient_assist.server.settings import load_settings
from tests.server.hostile_agents import Flood
from tests.server.tiny_face import TINY_PATH, TinyFace
from tests.support.agents import ScriptedAgent
from tests.support.server import ROOT, clean_env, running_server, uvicorn_in_thread
from tests.support.waiting import wait_until

KEY = "tiny-face-key"
ALL_FACES = "assist,openai,playground,mcp,agui,a2a"


def test_by_default_mcp_agui_and_a2a_are_not_served_though_their_extras_are_installed():
    import a2a  # noqa: F401  (the extra is installed: it is not what decides)

    with running_server({"ASSIST_AGENT": "echo"}) as server:
        assert httpx.get(server.url + "/.well-known/agent-card.json").status_code == 404
        for path in ("/a2a", "/mcp", "/agui"):
            assert httpx.post(server.url + path, json={}).status_code == 404, path
        assert httpx.get(server.url + "/v1/models").status_code == 200
        assert httpx.get(server.url + "/playground/").status_code == 200
        log = server.log()
    for path in ("/assist", "/v1", "/playground"):
        assert f"serving echo at {path}" in log, log
    assert "at /mcp" not in log and "at /a2a" not in log and "at /agui" not in log


def test_named_faces_are_served_and_the_others_are_not():
    env = {"ASSIST_AGENT": "echo", "ASSIST_FACES": "assist,a2a"}
    with running_server(env) as server:
        assert httpx.get(server.url + "/.well-known/agent-card.json").status_code == 200
        assert httpx.get(server.url + "/v1/models").status_code == 404
        assert httpx.get(server.url + "/playground/").status_code == 404
        assert "serving echo at /a2a (face a2a)" in server.log()


def _serve(env: dict[str, str], *, hide: str | None = None) -> subprocess.CompletedProcess[str]:
    """`assist serve` as a user types it, in a fresh interpreter; `hide` makes a module not installed."""
    hiding = f"sys.modules[{hide!r}] = None; " if hide else ""
    code = f"import sys; {hiding}from sentient_assist.cli import main; sys.exit(main(['serve', '--port', '9']))"
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=clean_env(env), timeout=60
    )


@pytest.mark.parametrize(
    ("face", "module", "extra"), [("mcp", "mcp", "mcp"), ("agui", "ag_ui", "agui"), ("a2a", "a2a", "a2a")]
)
def test_a_face_named_without_its_extra_stops_the_start_with_one_line_naming_it(face, module, extra):
    done = _serve({"ASSIST_AGENT": "echo", "ASSIST_FACES": f"assist,{face}"}, hide=module)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"error: ASSIST_FACES names {face}") and f"sentient-assist[{extra}]" in lines[0]


def test_an_unknown_face_is_refused_naming_the_setting_and_the_faces():
    done = _serve({"ASSIST_AGENT": "echo", "ASSIST_FACES": "assist,grpc"})
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "ASSIST_FACES='grpc'" in done.stderr and "'agui' or 'a2a'" in done.stderr, done.stderr


def _tiny_app(agent: AbstractAgent | None = None, **overrides: object) -> FastAPI:
    """The service with only /assist, and the tiny face mounted on it as a user mounts a face."""
    settings = load_settings(api_keys=KEY, **overrides)
    app = create_app(settings, agent or ScriptedAgent(), faces=["assist"])
    app.include_router(TinyFace(app.state.service).router())
    return app


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.fields: list[dict[str, object]] = []

    def emit(self, record: logging.LogRecord) -> None:
        fields = getattr(record, "fields", {})
        if fields.get("path") == TINY_PATH:
            self.fields.append(fields)


@pytest.fixture
def access_log() -> Iterator[_Lines]:
    """The access log's lines for the tiny face, from its logger itself (the service's loggers do
    not propagate to pytest's); `attach()` once the app is built, since building it configures logging."""
    lines = _Lines()
    logger = logging.getLogger("sentient_assist.access")
    lines.attach = lambda: logger.addHandler(lines)  # type: ignore[attr-defined]
    try:
        yield lines
    finally:
        logger.removeHandler(lines)


def test_a_face_of_ones_own_is_admitted_and_refused_in_its_own_shape():
    with uvicorn_in_thread(_tiny_app(max_body_bytes=2048)) as (_, (host, port)):
        url = f"http://{host}:{port}{TINY_PATH}"
        auth = {"Authorization": f"Bearer {KEY}"}
        no_key = httpx.post(url, json={"prompt": "hi"})
        assert no_key.status_code == 401 and no_key.text.startswith("tiny refused: an API key is required")
        too_big = httpx.post(url, json={"prompt": "x" * 4096}, headers=auth)
        assert too_big.status_code == 413 and too_big.text.startswith("tiny refused: the request body is larger")
        empty = httpx.post(url, json={"prompt": " "}, headers=auth)
        assert empty.status_code == 400 and empty.text == "tiny refused: prompt: say something"
        answer = httpx.post(url, json={"prompt": "hi"}, headers=auth)
        assert answer.status_code == 200 and answer.text.endswith("done: \n")


def test_a_face_of_ones_own_shares_the_stream_budget_and_is_logged_with_its_agent_and_outcome(access_log):
    app = _tiny_app(max_streams=1)
    access_log.attach()
    auth = {"Authorization": f"Bearer {KEY}"}
    with (
        uvicorn_in_thread(app) as (_, (host, port)),
        httpx.Client(base_url=f"http://{host}:{port}", timeout=10) as client,
    ):
        with client.stream("POST", TINY_PATH, json={"prompt": "silent:30"}, headers=auth) as waiting:
            assert waiting.status_code == 200
            lines = waiting.iter_lines()  # kept: an iterator let go closes the response, and the client leaves
            assert next(lines) == "STATUS: thinking quietly"
            # The one place is the tiny face's: /assist is refused while it is held, as behind any face.
            refused = client.post(
                "/assist", json={"query": {"id": "01JDQ4Z8M7T3V5X9A2B4C6D8EF", "prompt": "silent:0"}}, headers=auth
            )
            assert refused.status_code == 503 and "concurrent streams" in refused.json()["detail"]
        assert wait_until(lambda: len(access_log.fields) == 1, 10)
        # Its client gone, its place is free again.
        served = client.post(
            "/assist", json={"query": {"id": "01JDQ4Z8M7T3V5X9A2B4C6D8EF", "prompt": "silent:0"}}, headers=auth
        )
        assert served.status_code == 200 and "spoke at last" in served.text
    [line] = access_log.fields
    assert line["agent"] == "scripted" and line["outcome"] == "disconnected" and line["status"] == 200


def test_a_face_of_ones_own_whose_client_stops_reading_is_cut_off(access_log):
    # An answer without end, faster than a client that reads nothing takes it.
    app = _tiny_app(Flood(), request_timeout=1)
    access_log.attach()
    with uvicorn_in_thread(app) as (_, (host, port)):
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect((host, port))
        body = b'{"prompt": "100000"}'
        sock.sendall(
            b"POST " + TINY_PATH.encode() + b" HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
            b"Authorization: Bearer "
            + KEY.encode()
            + b"\r\nContent-Length: "
            + str(len(body)).encode()
            + b"\r\n\r\n"
            + body
        )
        assert wait_until(lambda: len(access_log.fields) == 1, 15)
        sock.close()
    [line] = access_log.fields
    assert line["outcome"] == "cut_off" and line["agent"] == "flood", line


def test_every_face_logs_its_agent_and_how_its_run_ended():
    env = {"ASSIST_AGENT": "echo", "ASSIST_FACES": "assist,mcp,a2a"}
    mcp_headers = {"accept": "application/json, text/event-stream"}
    listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    message = {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}
    sending = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
    with running_server(env) as server:
        assert httpx.post(server.url + "/mcp", json=listing, headers=mcp_headers).status_code == 200
        sent = httpx.post(server.url + "/a2a", json=sending, headers={"A2A-Version": "1.0"})
        assert sent.status_code == 200 and sent.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
        assert wait_until(lambda: server.log().count("path=/a2a") == 1, 10)
        lines = [line for line in server.log().splitlines() if "sentient_assist.access" in line]
    [mcp_line] = [line for line in lines if "path=/mcp" in line]
    [a2a_line] = [line for line in lines if "path=/a2a" in line]
    assert "agent=echo events=0 outcome=no_run" in mcp_line, mcp_line
    assert "agent=echo" in a2a_line and "outcome=completed" in a2a_line, a2a_line
