"""Browsers and host names (issue 40, part 5), against a real uvicorn serving every face: a body
that is not JSON is a 415, a page of another origin a 403 and, for a service on loopback, a
`Host` that is not the service's (DNS rebinding) a 421, on every face, before the key and before
a stream place; the service's own pages, the origins named and the host names allowed pass."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.support.request import post
from tests.support.server import ALL_FACES, RunningServer, Servers

ALLOWED_ORIGIN = "https://chat.example.com"
ALLOWED_HOST = "assist.example.com"
ENV = {
    "ASSIST_AGENT": "echo",
    "ASSIST_LOG_LEVEL": "warning",
    "ASSIST_CORS_ORIGINS": ALLOWED_ORIGIN,
    **ALL_FACES,
}
ULID = "01JDQ4Z8M7T3V5X9A2B4C6D8EF"
A2A_MESSAGE = {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}
# A request each face runs the agent for, and the headers its protocol asks for.
FACES: dict[str, tuple[dict[str, Any], dict[str, str]]] = {
    "/assist": ({"query": {"id": ULID, "prompt": "hi"}}, {}),
    "/v1/chat/completions": ({"model": "echo", "messages": [{"role": "user", "content": "hi"}]}, {}),
    "/agui": ({"threadId": "t", "runId": "r", "messages": [{"id": "u", "role": "user", "content": "hi"}]}, {}),
    "/mcp": (
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-06-18"},
    ),
    "/a2a": (
        {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": A2A_MESSAGE}},
        {"A2A-Version": "1.0"},
    ),
}
JSON_RPC_FACES = {"/mcp", "/a2a"}


@pytest.fixture(scope="module")
def server(serve: Servers) -> RunningServer:
    return serve(ENV)


def _refused(response: httpx.Response, path: str, status: int) -> str:
    """The message of a refusal, in the face's own shape."""
    assert response.status_code == status, (path, response.status_code, response.text[:200])
    body = response.json()
    if path in JSON_RPC_FACES:
        assert body["id"] is None
        return str(body["error"]["message"])
    return str(body["detail"] if "detail" in body else body["error"]["message"])


@pytest.mark.parametrize("path", FACES)
def test_every_face_answers_its_own_request(server, path):
    body, headers = FACES[path]
    assert post(server, path, body, headers=headers).status_code == 200


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data"])
@pytest.mark.parametrize("path", FACES)
def test_a_body_that_is_not_json_is_a_415_on_every_face(server, path, content_type):
    body, headers = FACES[path]
    refused = post(server, path, body, headers=headers, content_type=content_type)
    assert "Content-Type: application/json" in _refused(refused, path, 415)


def test_a2a_does_not_run_a_cross_site_text_plain_message_of_its_0_3_names(server):
    # A page's form or fetch may POST text/plain with no preflight: the agent never runs.
    sending = {"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": {"kind": "message"}}}
    runs = 'assist_streams_total{outcome="complete"}'
    before = server.metric(runs)
    assert post(server, "/a2a", sending, content_type="text/plain").status_code == 415
    assert server.metric(runs) == before


@pytest.mark.parametrize("origin", ["https://evil.example", "null", "http://127.0.0.1.evil.example"])
@pytest.mark.parametrize("path", FACES)
def test_a_page_of_another_origin_is_a_403_on_every_face(server, path, origin):
    body, headers = FACES[path]
    refused = post(server, path, body, headers={**headers, "Origin": origin})
    assert "ASSIST_CORS_ORIGINS" in _refused(refused, path, 403)


@pytest.mark.parametrize("path", FACES)
def test_the_origins_named_and_the_services_own_pages_pass(server, path):
    body, headers = FACES[path]
    own = server.url  # the playground's page, served by the service itself
    for origin in (ALLOWED_ORIGIN, own):
        assert post(server, path, body, headers={**headers, "Origin": origin}).status_code == 200, origin


def test_a_resumable_runs_read_checks_the_origin_too(serve):
    server = serve({**ENV, "ASSIST_DETACH_GRACE": "5"})
    answer = httpx.get(server.url + "/assist/runs/" + "a" * 22, headers={"Origin": "https://evil.example"})
    assert answer.status_code == 403 and "ASSIST_CORS_ORIGINS" in answer.json()["detail"]
    assert httpx.get(server.url + "/assist/runs/" + "a" * 22).status_code == 404


@pytest.mark.parametrize("path", FACES)
def test_a_host_name_of_its_own_is_a_421_on_loopback(server, path):
    # DNS rebinding: the page's name resolves to 127.0.0.1, so its Origin and Host agree.
    body, headers = FACES[path]
    rebound = {**headers, "Host": "rebind.attacker.example", "Origin": "http://rebind.attacker.example"}
    assert "ASSIST_ALLOWED_HOSTS" in _refused(post(server, path, body, headers=rebound), path, 421)
    port = server.url.rsplit(":", 1)[1]
    for host in (f"localhost:{port}", f"127.0.0.1:{port}", ALLOWED_HOST):
        answer = post(server, path, body, headers={**headers, "Host": host})
        assert answer.status_code == (200 if host != ALLOWED_HOST else 421), (host, answer.text[:200])


def test_the_hosts_allowed_are_the_only_ones_answered(serve):
    server = serve({**ENV, "ASSIST_ALLOWED_HOSTS": f"{ALLOWED_HOST},Other.Example"})
    body, _ = FACES["/assist"]
    for host, status in ((ALLOWED_HOST, 200), ("other.example:8443", 200), ("localhost", 200), ("evil.example", 421)):
        assert post(server, "/assist", body, headers={"Host": host}).status_code == status, host
    # A page of an allowed host name is the service's own.
    own = {"Host": ALLOWED_HOST, "Origin": f"http://{ALLOWED_HOST}"}
    assert post(server, "/assist", body, headers=own).status_code == 200


def test_refusals_come_before_the_key_and_take_no_place(serve):
    server = serve({**ENV, "ASSIST_API_KEYS": "the-key", "ASSIST_MAX_STREAMS": "1"})
    body, _ = FACES["/assist"]
    assert post(server, "/assist", body, headers={"Origin": "https://evil.example"}).status_code == 403
    assert post(server, "/assist", body, content_type="text/plain").status_code == 401
    assert post(server, "/assist", body, key="the-key", content_type="text/plain").status_code == 415
    assert server.metric("assist_open_streams") == 0
    assert post(server, "/assist", body, key="the-key").status_code == 200
