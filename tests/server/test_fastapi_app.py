"""The service is a FastAPI app in every way a FastAPI user tries: middleware, dependencies,
exception handlers, mounting and including apply to POST /assist too. Each app is in
tests/server/user_apps.py, served by a real uvicorn on loopback."""

from __future__ import annotations

import gc
import sys

import httpx
import pytest
from fastapi.testclient import TestClient

from sentient_assist import create_app
from tests.server.test_stream_guarantees import (
    assert_a_disconnect_cancels_the_agent,
    assert_well_ended,
)
from tests.support.agents import ScriptedAgent
from tests.support.server import RunningServer, Servers
from tests.support.sse import new_body, read_stream

AGENT = {"ASSIST_AGENT": "tests.support.agents:ScriptedAgent"}
KEY = "user-app-key-5d1e"


def serving(serve: Servers, factory: str, env: dict[str, str] | None = None) -> RunningServer:
    """The app of `factory` under uvicorn's own command line, as a FastAPI user serves it."""
    command = [sys.executable, "-m", "uvicorn", "--factory", f"tests.server.user_apps:{factory}"]
    return serve({**AGENT, **(env or {})}, command=command)


def counted(server: RunningServer, request: str) -> int:
    """How many times the user's middleware saw `request` ("POST /assist") so far."""
    count: int = httpx.get(server.url + "/counted").json().get(request, 0)
    return count


@pytest.fixture(scope="module")
def with_middleware(serve: Servers) -> RunningServer:
    return serving(serve, "with_middleware")


def test_pure_asgi_and_base_http_middleware_see_assist_and_the_stream_still_streams(with_middleware):
    before = counted(with_middleware, "POST /assist")
    stream = read_stream(with_middleware.url, new_body("session"))
    assert stream.status == 200
    assert_well_ended(stream)
    assert stream.headers["x-pure-middleware"] == "seen"
    assert stream.headers["x-base-middleware"] == "seen"
    assert stream.headers["content-type"].startswith("text/event-stream")
    assert "x-request-id" in stream.headers  # the service's own middleware still runs too
    assert counted(with_middleware, "POST /assist") == before + 1


def test_refusals_pass_through_the_users_middleware_too(with_middleware):
    response = httpx.post(with_middleware.url + "/assist", json={"query": {"id": "nope", "prompt": "x"}})
    assert response.status_code == 422 and response.json()["detail"][0]["loc"] == ["body", "query", "id"]
    assert response.headers["x-pure-middleware"] == "seen" and response.headers["x-base-middleware"] == "seen"


def test_a_disconnect_behind_base_http_middleware_still_cancels_the_agent(with_middleware, tmp_path):
    assert_a_disconnect_cancels_the_agent(with_middleware.url, tmp_path / "cancelled")


def test_pings_reach_the_client_through_base_http_middleware(serve):
    stream = read_stream(serving(serve, "with_middleware", {"ASSIST_PING_INTERVAL": "0.2"}).url, new_body("silent:1.2"))
    assert_well_ended(stream)
    assert len(stream.comments) >= 3, stream.comments


@pytest.fixture(scope="module")
def with_dependencies(serve: Servers) -> RunningServer:
    return serving(serve, "with_dependencies")


def test_add_routes_serves_assist_under_its_path_with_the_users_middleware(with_dependencies):
    before = counted(with_dependencies, "POST /bots/showcase/assist")
    stream = read_stream(with_dependencies.url + "/bots/showcase", new_body("session"))
    assert stream.status == 200
    assert_well_ended(stream)
    assert stream.headers["x-pure-middleware"] == "seen"
    assert counted(with_dependencies, "POST /bots/showcase/assist") == before + 1
    assert httpx.post(with_dependencies.url + "/assist", json=new_body("session")).status_code == 404


def test_app_level_and_route_level_dependencies_run_for_assist(with_dependencies):
    url = with_dependencies.url + "/bots/showcase/assist"
    blocked = httpx.post(url, json=new_body("session"), headers={"X-Block": "1"})
    assert blocked.status_code == 403 and blocked.json() == {"detail": "blocked by the app's dependency"}
    refused = httpx.post(url, json=new_body("session"), headers={"X-Route": "refuse"})
    assert refused.status_code == 403 and refused.json() == {"detail": "refused by the route's dependency"}


def test_the_users_exception_handlers_apply_to_assist(with_dependencies):
    response = httpx.post(
        with_dependencies.url + "/bots/showcase/assist", json=new_body("session"), headers={"X-Route": "teapot"}
    )
    assert response.status_code == 418 and response.json() == {"detail": "short and stout"}


def test_a_validation_handler_added_to_create_app_answers_for_assist(serve):
    server = serving(serve, "with_validation_handler")
    response = httpx.post(server.url + "/assist", json={"query": {"id": "nope", "prompt": "x"}})
    assert response.status_code == 400 and response.json() == {"mine": True, "errors": 1}


def test_mounted_with_keys_probes_stay_open_and_assist_and_docs_need_the_key(serve):
    server = serving(serve, "mounted", {"ASSIST_API_KEYS": KEY})
    base = server.url + "/agent"
    for path in ("/healthz", "/readyz", "/metrics"):
        assert httpx.get(base + path).status_code == 200, path
    assert httpx.get(server.url + "/").json() == {"app": "outer"}
    assert httpx.post(base + "/assist", json=new_body("session")).status_code == 401
    stream = read_stream(base, new_body("session"), headers={"Authorization": f"Bearer {KEY}"})
    assert stream.status == 200
    assert_well_ended(stream)
    for path in ("/docs", "/openapi.json"):
        assert httpx.get(base + path).status_code == 401, path
    docs = httpx.get(base + "/docs", headers={"Authorization": f"Bearer {KEY}"})
    assert docs.status_code == 200 and "/agent/openapi.json" in docs.text  # the page finds its schema under the mount
    schema = httpx.get(base + "/openapi.json", headers={"Authorization": f"Bearer {KEY}"}).json()
    assert "/assist" in schema["paths"]


def test_the_services_router_included_in_another_app_serves_assist(serve):
    server = serving(serve, "included")
    stream = read_stream(server.url, new_body("session"))
    assert stream.status == 200
    assert_well_ended(stream)
    assert httpx.get(server.url + "/healthz").json() == {"status": "ok"}


def test_what_exists_when_the_service_starts_is_frozen_out_of_the_collectors_full_passes():
    gc.unfreeze()
    try:
        with TestClient(create_app(agent=ScriptedAgent())) as client:
            assert gc.get_freeze_count() > 0
            assert client.get("/healthz").status_code == 200
    finally:
        gc.unfreeze()  # the rest of the test session is collected as usual
