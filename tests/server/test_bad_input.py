"""Bad bodies get a 422 that names the field, fast, and the server keeps serving."""

from __future__ import annotations

import httpx
import pytest

from tests.support.request import post
from tests.support.sse import new_body, read_stream

GOOD_ID = "01JDQ4Z8M7T3V5X9A2B4C6D8EF"


@pytest.mark.parametrize(
    ("body", "loc"),
    [
        (b'{"query": {"id": "01JDQ4Z8M7T3V5X9A2B4C6D8EF", "prompt": "x"', ["body"]),
        (b'{"query": {"id": "01JDQ4Z8M7T3V5X9A2B4C6D8EF"}}', ["body", "query", "prompt"]),
        (b'{"session": null}', ["body", "query"]),
        (b'{"query": {"id": "not-a-ulid", "prompt": "x"}}', ["body", "query", "id"]),
        (b'{"query": {"id": "01JDQ4Z8M7T3V5X9A2B4C6D8E", "prompt": "x"}}', ["body", "query", "id"]),
        (b'{"query": {"id": 12345, "prompt": "x"}}', ["body", "query", "id"]),
        (b'{"query": {"id": "01JDQ4Z8M7T3V5X9A2B4C6D8EF", "prompt": 5}}', ["body", "query", "prompt"]),
        (
            b'{"query": {"id": "01JDQ4Z8M7T3V5X9A2B4C6D8EF", "prompt": "x"}, "session": {"processor_id": "p",'
            b' "activity_id": "01JDQ4Z8M7T3V5X9A2B4C6D8EU", "request_id": "01JDQ4Z8M7T3V5X9A2B4C6D8EF"}}',
            ["body", "session", "activity_id"],
        ),
        (b"[]", ["body"]),
        (b"", ["body"]),
    ],
)
def test_a_bad_body_is_a_422_naming_the_field(scripted_server, body, loc):
    response = post(scripted_server, "/assist", body)
    assert response.status_code == 422
    details = response.json()["detail"]
    assert any(d["loc"][: len(loc)] == loc for d in details), details
    assert all(d["msg"] for d in details)


def test_a_body_that_is_not_json_says_how_to_send_it(scripted_server):
    body = b'{"query": {"id": "01JDQ4Z8M7T3V5X9A2B4C6D8EF", "prompt": "x"}}'
    response = post(scripted_server, "/assist", body, content_type="application/x-www-form-urlencoded")
    assert response.status_code == 415
    assert "Content-Type: application/json" in response.json()["detail"]


def test_the_server_keeps_serving_after_bad_requests(scripted_server):
    for _ in range(20):
        assert post(scripted_server, "/assist", b"{").status_code == 422
    stream = read_stream(scripted_server.url, new_body("session"))
    assert stream.status == 200 and stream.names()[-1] == "done"


def test_health_and_docs(scripted_server):
    assert httpx.get(scripted_server.url + "/healthz").json() == {"status": "ok"}
    schema = httpx.get(scripted_server.url + "/openapi.json").json()
    assert "/assist" in schema["paths"]
    assert schema["components"]["schemas"]["Request"]["examples"][0]["query"]["prompt"]
    assert httpx.get(scripted_server.url + "/docs").status_code == 200


def test_the_openapi_schema_describes_assist_from_its_route(scripted_server):
    schema = httpx.get(scripted_server.url + "/openapi.json").json()
    operation = schema["paths"]["/assist"]["post"]
    body = operation["requestBody"]["content"]["application/json"]["schema"]
    assert body == {"$ref": "#/components/schemas/Request"}
    ok = operation["responses"]["200"]
    assert list(ok["content"]) == ["text/event-stream"]
    assert ok["content"]["text/event-stream"]["itemSchema"]["required"] == ["event", "data"]
    assert "done" in ok["description"]
    assert {"400", "401", "413", "422", "503"} <= set(operation["responses"])
    # No keys on this server: no security scheme, no Authorize button.
    assert "security" not in operation and "securitySchemes" not in schema.get("components", {})
