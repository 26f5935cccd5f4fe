"""Auth, CORS, limits, metrics and logs, against a real uvicorn as an operator would run it."""

from __future__ import annotations

import json
import socket
import threading

import httpx
import pytest

from tests.support.request import bearer, post
from tests.support.sse import iter_events, new_body, read_stream
from tests.support.waiting import wait_until

KEYS = ("key-one-4f1c", "key-two-9a7e")
ORIGIN = "https://chat.example"
MAX_BODY = 4096
MAX_STREAMS = 2
PROMPT_MARKER = "prompt-marker-that-must-not-be-logged"


@pytest.fixture(scope="module")
def guarded_server(serve):
    env = {
        "ASSIST_AGENT": "tests.support.agents:ScriptedAgent",
        "ASSIST_API_KEYS": ",".join(KEYS),
        "ASSIST_CORS_ORIGINS": ORIGIN,
        "ASSIST_MAX_BODY_BYTES": str(MAX_BODY),
        "ASSIST_MAX_STREAMS": str(MAX_STREAMS),
        # The whole budget to one key: these tests are of ASSIST_MAX_STREAMS itself (two keys
        # would share it by halves: tests/server/test_hostile_round_three.py).
        "ASSIST_MAX_STREAMS_PER_KEY": str(MAX_STREAMS),
        "ASSIST_LOG_FORMAT": "json",
        "ASSIST_REQUEST_TIMEOUT": "20",
    }
    return serve(env)


def auth(key: str = KEYS[0]) -> dict[str, str]:
    return bearer(key)


def test_without_a_valid_key_assist_is_401_with_www_authenticate(guarded_server):
    missing = post(guarded_server, "/assist", new_body("session"))
    assert missing.status_code == 401 and missing.headers["www-authenticate"].startswith("Bearer")
    for headers in ({"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {KEYS[0]}"}, auth(KEYS[0] + "x")):
        response = post(guarded_server, "/assist", new_body("session"), headers=headers)
        assert response.status_code == 401, headers
        assert "WWW-Authenticate" in response.headers
        assert KEYS[0] not in response.text


@pytest.mark.parametrize("key", KEYS)
def test_each_configured_key_opens_the_stream(guarded_server, key):
    stream = read_stream(guarded_server.url, new_body("session"), headers=auth(key))
    assert stream.status == 200 and stream.names()[-1] == "done"


def test_probes_are_open_and_docs_need_the_key(guarded_server):
    for path in ("/healthz", "/readyz", "/metrics"):
        assert httpx.get(guarded_server.url + path).status_code == 200, path
    for path in ("/docs", "/openapi.json"):
        assert httpx.get(guarded_server.url + path).status_code == 401, path
        assert httpx.get(guarded_server.url + path, headers=auth()).status_code == 200, path


def test_cors_allows_the_configured_origin_only(guarded_server):
    def preflight(origin: str) -> httpx.Response:
        headers = {
            "Origin": origin,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization,content-type",
        }
        return httpx.options(guarded_server.url + "/assist", headers=headers)

    allowed = preflight(ORIGIN)
    assert allowed.status_code == 200
    assert allowed.headers["access-control-allow-origin"] == ORIGIN
    assert "authorization" in allowed.headers["access-control-allow-headers"].lower()
    refused = preflight("https://evil.example")
    assert "access-control-allow-origin" not in refused.headers
    stream = read_stream(guarded_server.url, new_body("session"), headers={**auth(), "Origin": ORIGIN})
    assert stream.headers["access-control-allow-origin"] == ORIGIN
    assert "x-request-id" in stream.headers["access-control-expose-headers"].lower()


def test_a_body_over_the_limit_is_413_before_it_is_parsed(guarded_server):
    big = new_body("x" * MAX_BODY)
    response = post(guarded_server, "/assist", big, key=KEYS[0])
    assert response.status_code == 413 and str(MAX_BODY) in response.json()["detail"]

    def chunked():
        payload = json.dumps(big).encode()
        for start in range(0, len(payload), 1000):
            yield payload[start : start + 1000]

    response = post(guarded_server, "/assist", chunked(), key=KEYS[0])
    assert response.status_code == 413
    # A prompt just under the limit is fine.
    assert read_stream(guarded_server.url, new_body("session"), headers=auth()).status == 200


def test_requests_whose_bodies_are_still_coming_count_against_max_streams(guarded_server):
    # A stream is counted from its headers, before its body arrives: MAX_STREAMS + 1 requests
    # that all start before any body is sent cannot all pass the limit.
    host, port = guarded_server.url.removeprefix("http://").split(":")
    body = json.dumps(new_body("session")).encode()
    head = (
        f"POST /assist HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {KEYS[0]}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode()
    refused = 'assist_http_requests_total{status="503"}'
    refused_before = guarded_server.metric(refused)
    sockets = [socket.create_connection((host, int(port)), timeout=10) for _ in range(MAX_STREAMS + 1)]
    try:
        for sock in sockets:
            sock.sendall(head)
        # Every request is in the service: MAX_STREAMS hold their places, waiting for their
        # bodies, and the one past them was refused on its headers.
        assert wait_until(
            lambda: (
                guarded_server.metric("assist_streams_open") == MAX_STREAMS
                and guarded_server.metric(refused) == refused_before + 1
            ),
            10,
        )
        statuses = []
        for sock in sockets:
            sock.sendall(body)
        for sock in sockets:
            statuses.append(sock.recv(64).split(b" ", 2)[1].decode())
    finally:
        for sock in sockets:
            sock.close()
    assert sorted(statuses) == ["200"] * MAX_STREAMS + ["503"], statuses


def test_past_max_streams_the_next_gets_503_with_retry_after_until_one_ends(guarded_server, tmp_path):
    holders = []
    opened = threading.Semaphore(0)

    def hold(index: int) -> None:
        with httpx.Client(timeout=30) as client:
            body = new_body(f"hang:{tmp_path / str(index)}")
            with client.stream("POST", guarded_server.url + "/assist", json=body, headers=auth()) as response:
                for _ in iter_events(response):
                    opened.release()
                    stop.wait(20)
                    return

    stop = threading.Event()
    for index in range(MAX_STREAMS):
        thread = threading.Thread(target=hold, args=(index,))
        thread.start()
        holders.append(thread)
    for _ in range(MAX_STREAMS):
        assert opened.acquire(timeout=10)
    try:
        refused = post(guarded_server, "/assist", new_body("session"), key=KEYS[0])
        assert refused.status_code == 503
        assert refused.headers["retry-after"] == "1"
        assert str(MAX_STREAMS) in refused.json()["detail"]
    finally:
        stop.set()
        for thread in holders:
            thread.join(timeout=10)
    # The disconnected streams gave their places back.
    assert wait_until(lambda: guarded_server.metric("assist_streams_open") == 0, 5)
    assert read_stream(guarded_server.url, new_body("session"), headers=auth()).status == 200


def test_metrics_count_requests_events_errors_and_disconnects(guarded_server, tmp_path):
    def sample(name: str) -> float:
        text = httpx.get(guarded_server.url + "/metrics").text
        return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name))

    before = {
        n: sample(n)
        for n in (
            "assist_agent_errors_total",
            'assist_http_requests_total{status="401"}',
            'assist_events_sent_total{content_type="atomic.done"}',
            "assist_disconnects_total",
            "assist_stream_duration_seconds_count",
        )
    }
    post(guarded_server, "/assist", new_body("session"))  # 401
    read_stream(guarded_server.url, new_body("raise"), headers=auth())
    with httpx.Client(timeout=10) as client:
        with client.stream(
            "POST", guarded_server.url + "/assist", json=new_body(f"hang:{tmp_path / 'm'}"), headers=auth()
        ) as r:
            next(iter_events(r))
    # The disconnect is counted once the service has seen the client go and the stream ended.
    assert wait_until(lambda: sample("assist_disconnects_total") == before["assist_disconnects_total"] + 1, 5)
    assert wait_until(lambda: sample("assist_streams_open") == 0, 5)
    after = {n: sample(n) for n in before}
    assert after["assist_agent_errors_total"] == before["assist_agent_errors_total"] + 1
    assert after['assist_http_requests_total{status="401"}'] == before['assist_http_requests_total{status="401"}'] + 1
    assert (
        after['assist_events_sent_total{content_type="atomic.done"}']
        >= before['assist_events_sent_total{content_type="atomic.done"}'] + 1
    )
    assert after["assist_disconnects_total"] == before["assist_disconnects_total"] + 1
    assert after["assist_stream_duration_seconds_count"] >= before["assist_stream_duration_seconds_count"] + 2
    assert sample("assist_streams_open") == 0


def test_logs_are_json_lines_one_per_request_without_prompts_or_keys(guarded_server):
    stream = read_stream(
        guarded_server.url, new_body(f"session {PROMPT_MARKER}"), headers={**auth(), "X-Request-ID": "trace-abc-123"}
    )
    assert stream.headers["x-request-id"] == "trace-abc-123"
    assert wait_until(lambda: '"trace-abc-123"' in guarded_server.log(), 5)  # written once the stream ended
    log = guarded_server.log()
    entries = [json.loads(line) for line in log.splitlines() if line.strip()]
    mine = [e for e in entries if e.get("request_id") == "trace-abc-123"]
    assert len(mine) == 1, mine
    line = mine[0]
    assert line["status"] == 200 and line["agent"] == "scripted" and line["events"] == stream.names().__len__()
    assert line["duration_ms"] >= 0 and line["path"] == "/assist"
    assert PROMPT_MARKER not in log
    assert all(key not in log for key in KEYS)


def test_metrics_sum_over_workers(serve):
    bad_requests = 12
    server = serve(args=["--workers", "2"])
    counted = 'assist_http_requests_total{status="422"}'
    before = server.metric(counted)
    for _ in range(bad_requests):
        assert post(server, "/assist", b"{").status_code == 422
    # Whichever worker answers a scrape, it reports the requests of both (per worker, the
    # kernel's uneven spread of connections shows as differing counts).
    assert {server.metric(counted) for _ in range(8)} == {before + bad_requests}


async def test_while_draining_readyz_and_new_streams_answer_503():
    import signal

    import uvicorn

    from sentient_assist import create_app, load_settings

    app = create_app(load_settings(agent="tests.support.agents:ScriptedAgent"))
    # What uvicorn does in the process it serves from: its server's handle_exit is the SIGTERM
    # handler, and a SIGTERM sets its should_exit.
    server = uvicorn.Server(uvicorn.Config(app))
    previous = signal.signal(signal.SIGTERM, server.handle_exit)
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://service") as client:
            assert (await client.get("/readyz")).json() == {"status": "ready"}
            server.should_exit = True
            assert (await client.get("/readyz")).status_code == 503
            refused = await client.post("/assist", json=new_body("session"))
            assert refused.status_code == 503 and refused.headers["retry-after"] == "1"
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_with_keys_the_openapi_schema_declares_the_bearer_scheme_for_assist(guarded_server):
    schema = httpx.get(guarded_server.url + "/openapi.json", headers=auth()).json()
    schemes = schema["components"]["securitySchemes"]
    assert [scheme["scheme"] for scheme in schemes.values()] == ["bearer"]
    assert schema["paths"]["/assist"]["post"]["security"] == [{name: []} for name in schemes]
    for path in ("/healthz", "/readyz", "/metrics"):
        assert "security" not in schema["paths"][path]["get"], path
    docs = httpx.get(guarded_server.url + "/docs", headers=auth())
    assert docs.status_code == 200 and "swagger-ui" in docs.text
