"""/assist reads its body itself, ahead of FastAPI's routing: it must answer every body as a
FastAPI route declared with the same model would (status, and each error's place and kind),
and the app must still be taken for an ASGI 3 app by the server that loads it."""

from __future__ import annotations

import json

import httpx
import pytest
from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from sentient_assist import create_app, load_settings
from sentient_assist.protocol.request import Request
from sentient_assist.server.validation import validation_detail

GOOD_ID = "01JDQ4Z8M7T3V5X9A2B4C6D8EF"
GOOD = json.dumps({"query": {"id": GOOD_ID, "prompt": "session"}}).encode()
JSON = "application/json"
# Content types FastAPI (strict) does not read as JSON: the service answers 415 (issue 40).
NOT_JSON = {None, "", "text/plain", "application/x-www-form-urlencoded", ";;;"}
NOT_JSON_DETAIL = "the body must be JSON, sent with Content-Type: application/json"

# (body, content type): valid and invalid bodies, odd encodings, odd content types.
BODIES = [
    (GOOD, JSON),
    (GOOD, None),
    (GOOD, ""),
    (GOOD, "text/plain"),
    (GOOD, "application/x-www-form-urlencoded"),
    (GOOD, "application/vnd.api+json"),
    (GOOD, "APPLICATION/JSON; charset=latin-1"),
    (GOOD, ";;;"),
    (b"", JSON),
    (b"", None),
    (b"{", JSON),
    (GOOD[:-1], JSON),
    (b"[]", JSON),
    (b"5", JSON),
    (b"null", JSON),
    (b'"x"', JSON),
    (b"\xef\xbb\xbf" + GOOD, JSON),
    (GOOD.decode().encode("utf-16"), JSON),
    (GOOD.decode().encode("utf-32-le"), JSON),
    (b'{"query": {"id": "' + GOOD_ID.encode() + b'", "prompt": "\xff"}}', JSON),
    (b"[" * 50_000 + b"]" * 50_000, JSON),
    (b'{"query": {"id": "' + GOOD_ID.encode() + b'", "prompt": NaN}}', JSON),
    (b'{"query": {"id": "' + GOOD_ID.encode() + b'", "prompt": "a\\ud800b"}}', JSON),
    (b'{"query": {"id": "' + GOOD_ID.encode() + b'", "prompt": 1, "prompt": "x"}}', JSON),
    (b'{"query": {"id": "' + GOOD_ID.encode() + b'"}}', JSON),
    (b'{"query": {"id": "nope", "prompt": "x"}}', JSON),
    (b'{"query": {"id": 5, "prompt": "x"}}', JSON),
    (b'{"session": null}', JSON),
    (b'{"query": {"id": "' + GOOD_ID.encode() + b'", "prompt": "x"}, "session": {"processor_id": "p"}}', JSON),
    (
        b'{"query": {"id": "' + GOOD_ID.encode() + b'", "prompt": "x"}, "session": {"processor_id": "p",'
        b' "activity_id": "01JDQ4Z8M7T3V5X9A2B4C6D8EU", "request_id": "' + GOOD_ID.encode() + b'"}}',
        JSON,
    ),
    (
        b'{"query": {"id": "' + GOOD_ID.encode() + b'", "prompt": "x"}, "session": {"processor_id": "p",'
        b' "activity_id": "' + GOOD_ID.encode() + b'", "request_id": "' + GOOD_ID.encode() + b'",'
        b' "interactions": [{"request": {}}]}}',
        JSON,
    ),
]


def fastapi_reference() -> FastAPI:
    """A plain FastAPI route taking the same body: the behaviour /assist must match."""
    reference = FastAPI()

    @reference.post("/assist")
    async def assist(body: Request) -> dict[str, str]:
        return {}

    @reference.exception_handler(RequestValidationError)
    async def invalid(request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse(status_code=422, content={"detail": validation_detail(exc.errors())})

    return reference


def answer(response: httpx.Response) -> tuple[int, object]:
    if response.status_code == 200:
        return 200, None
    return response.status_code, response.json()["detail"]


@pytest.mark.parametrize(("body", "content_type"), BODIES, ids=range(len(BODIES)))
async def test_assist_answers_every_body_as_a_fastapi_route_would(body, content_type):
    service = create_app(load_settings(agent="tests.support.agents:ScriptedAgent"))
    headers = {} if content_type is None else {"Content-Type": content_type}
    answers = []
    for app in (service, fastapi_reference()):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://service") as client:
            answers.append(answer(await client.post("/assist", content=body, headers=headers)))
    ours, fastapi = answers
    if content_type in NOT_JSON:  # refused before FastAPI reads it, saying how to send it
        assert ours == (415, NOT_JSON_DETAIL)
    elif body.startswith(b"[" * 2_000):  # FastAPI's answer names nothing; ours names the body
        assert fastapi[0] == 400 and ours == (400, "body: nested too deep to be read")
    else:
        assert ours == fastapi


def test_asgi_servers_take_the_service_for_an_asgi3_app():
    # Service overrides FastAPI's __call__ to send /assist ahead of the routes: servers must
    # still see an ASGI 3 app, whether they ask asyncio (uvicorn) or inspect (hypercorn).
    import inspect

    from uvicorn.config import Config

    service = create_app(load_settings(agent="tests.support.agents:ScriptedAgent"))
    config = Config(service)
    config.load()
    assert config.interface == "asgi3"
    assert inspect.iscoroutinefunction(service.__call__)
