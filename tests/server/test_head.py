"""HEAD works wherever GET does (issue 23, item 7): the probes (load balancers send HEAD), the
playground's page, files and config.json, /docs and /openapi.json, /v1/models; the same status
and headers as GET, and no body. On a real server, without keys and with them."""

from __future__ import annotations

import httpx
import pytest

from tests.support.server import Servers

KEY = "head-test-key-0123456789"
# Headers that differ between any two requests, GET or not.
PER_REQUEST = {"date", "x-request-id"}

PATHS = [
    "/healthz",
    "/readyz",
    "/metrics",
    "/playground",
    "/playground/",
    "/playground/index.html",
    "/playground/playground.js",
    "/playground/config.json",
    "/docs",
    "/openapi.json",
    "/docs/swagger-ui/swagger-ui.css",
    "/v1/models",
    "/v1/models/showcase",
    "/v1/models/another-model",
    "/playground/no-such-file.js",
]


@pytest.fixture(scope="module")
def server(serve: Servers) -> str:
    return serve({"ASSIST_LOG_LEVEL": "warning"}).url


@pytest.fixture(scope="module")
def keyed_server(serve: Servers) -> str:
    return serve({"ASSIST_LOG_LEVEL": "warning", "ASSIST_API_KEYS": KEY}).url


def assert_head_answers_as_get(client: httpx.Client, path: str, headers: dict[str, str] | None = None) -> None:
    got = client.get(path, headers=headers)
    head = client.head(path, headers=headers)
    assert head.status_code == got.status_code, (path, got.status_code, head.status_code)
    assert head.content == b"", path
    varying = PER_REQUEST | ({"content-length"} if path == "/metrics" else set())  # the counts move on
    assert {k: v for k, v in head.headers.items() if k not in varying} == {
        k: v for k, v in got.headers.items() if k not in varying
    }, path


@pytest.mark.parametrize("path", PATHS)
def test_head_answers_as_get_does_without_the_body(server: str, path: str):
    with httpx.Client(base_url=server, timeout=10) as client:
        assert_head_answers_as_get(client, path)


def test_the_probes_answer_head_with_200(server: str):
    with httpx.Client(base_url=server, timeout=10) as client:
        for probe in ("/healthz", "/readyz"):
            assert client.head(probe).status_code == 200


@pytest.mark.parametrize(
    "path", ["/healthz", "/openapi.json", "/docs", "/v1/models", "/v1/models/showcase", "/playground/config.json"]
)
def test_with_keys_head_answers_as_get_does_with_the_key_and_without(keyed_server: str, path: str):
    with httpx.Client(base_url=keyed_server, timeout=10) as client:
        assert_head_answers_as_get(client, path)
        assert_head_answers_as_get(client, path, {"Authorization": f"Bearer {KEY}"})


def test_the_schema_shows_get_alone_and_a_refused_method_names_head_as_allowed(server: str):
    with httpx.Client(base_url=server, timeout=10) as client:
        paths = client.get("/openapi.json").json()["paths"]
        for path in ("/healthz", "/readyz", "/metrics", "/v1/models", "/v1/models/{model}"):
            assert set(paths[path]) == {"get"}, path
        refused = client.post("/healthz")
        assert refused.status_code == 405
        assert {method.strip() for method in refused.headers["allow"].split(",")} == {"GET", "HEAD"}
        models_refused = client.delete("/v1/models")
        assert models_refused.status_code == 405
        assert {method.strip() for method in models_refused.headers["allow"].split(",")} == {"GET", "HEAD"}
