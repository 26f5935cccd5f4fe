"""A provider's failure reaches the client as a message of ours (the provider's status and our
request id in `details`), never as the provider's text; the log keeps what an operator needs,
keys and prompt masked. The provider is a real HTTP server speaking the OpenAI format."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from ulid import ULID

from sentient_assist import AbstractAgent, LLMAgent, OpenAIChatModel
from sentient_assist.protocol.request import Query
from sentient_assist.runtime.run import Run, RunStats
from sentient_assist.runtime.session import Session
from sentient_assist.runtime.watcher import RunWatcher
from sentient_assist.server.logs import JsonFormatter, TextFormatter
from tests.runtime.test_response_handler import read_to_the_end
from tests.server.test_stream_guarantees import assert_streams_completed, assert_well_ended
from tests.support.openai_server import error_reply, raw_stream_reply, stream_reply
from tests.support.server import free_port
from tests.support.sse import Stream, new_body, read_stream

CONFIGURED_KEY = "sk-test-0123456789-secret"
OTHER_KEY = "sk-live-9f8e7d6c5b4a3928170615"  # a key the provider quotes that is not ours
MARKER = "PROMPT-MARKER-4242"
PROMPT = f"Tell me the story of {MARKER}, my bank details and my diagnosis."
LEAKS = (CONFIGURED_KEY, OTHER_KEY, MARKER, "bank details")


@pytest.fixture(scope="module")
def service(serve, model_server):
    env = {
        "ASSIST_AGENT": "assistant",
        "ASSIST_LOG_FORMAT": "json",
        "MODEL_BASE_URL": model_server.base_url,
        "MODEL_API_KEY": CONFIGURED_KEY,
        "MODEL_NAME": "test-model",
        "MODEL_TIMEOUT": "1",
    }
    return serve(env)


def ask(service, headers: dict[str, str] | None = None) -> tuple[Stream, dict[str, Any]]:
    """The stream of one request with PROMPT, and its error event's content."""
    stream = read_stream(service.url, new_body(PROMPT), headers=headers)
    assert_well_ended(stream)
    assert_streams_completed(stream)
    errors = [e["content"] for e in stream.events if e["event_name"] == "error"]
    assert len(errors) == 1 and stream.names()[-3:] == ["error", "USAGE", "done"]
    return stream, errors[0]


def failure_logged(service, request_id: str) -> dict[str, Any]:
    """The service's one log line for the provider failure of request `request_id`."""
    lines = [json.loads(line) for line in service.log().splitlines() if line.startswith("{")]
    found = [e for e in lines if e.get("request_id") == request_id and e["message"].startswith("model provider failed")]
    assert len(found) == 1, found
    return found[0]


def assert_nothing_leaked(stream: Stream, service) -> None:
    log = service.log()
    for leak in LEAKS:
        assert leak.encode() not in stream.raw, leak
        assert leak not in log, leak


def test_rejected_credentials_say_so_with_the_status_and_the_request_id_and_nothing_of_the_provider(service, model):
    model.enqueue(
        error_reply(401, f"Incorrect API key provided: {CONFIGURED_KEY} (also tried {OTHER_KEY}) for '{PROMPT}'.")
    )
    stream, error = ask(service, headers={"X-Request-ID": "client-req-401"})
    assert stream.headers["x-request-id"] == "client-req-401"
    assert error == {
        "error_message": "The model provider rejected the credentials.",
        "error_code": 502,
        "details": {"status": 401, "request_id": "client-req-401"},
    }
    assert_nothing_leaked(stream, service)
    logged = failure_logged(service, "client-req-401")
    assert logged["level"] == "warning" and logged["logger"] == "sentient_assist.llm"
    assert (logged["kind"], logged["status"], logged["model"]) == ("credentials", 401, "test-model")
    assert (logged["provider_type"], logged["provider_code"]) == ("invalid_request_error", "invalid_api_key")
    assert logged["provider_request_id"].startswith("req_")
    assert logged["provider_message"].startswith("Incorrect API key provided: *** (also tried sk-***) for '[sent text]")


def test_a_persistent_429_keeps_the_retry_hints(service, model):
    limited = error_reply(
        429,
        f"Rate limit reached for test-model in organization org-1234 on requests; key {OTHER_KEY}; '{PROMPT}'",
        headers={"retry-after-ms": "1", "retry-after": "1"},
    )
    model.enqueue(limited, limited, limited)
    stream, error = ask(service)
    request_id = stream.headers["x-request-id"]
    assert error == {
        "error_message": "The model provider is rate limiting; retry later.",
        "error_code": 429,
        "details": {"status": 429, "request_id": request_id, "retry_after": "1", "retry_after_ms": "1"},
    }
    assert_nothing_leaked(stream, service)
    logged = failure_logged(service, request_id)
    assert (logged["kind"], logged["status"], logged["provider_code"]) == ("rate_limit", 429, "rate_limit_exceeded")
    assert logged["provider_message"].startswith("Rate limit reached for test-model in organization org-1234")


def test_a_500_whose_body_quotes_the_prompt_does_not_leak_it(service, model):
    broken = error_reply(500, f"Internal error while processing '{PROMPT}' with Bearer {OTHER_KEY}")
    model.enqueue(broken, broken, broken)  # retried twice by the client before it gives up
    stream, error = ask(service)
    request_id = stream.headers["x-request-id"]
    assert error == {
        "error_message": "The model provider failed (HTTP 500).",
        "error_code": 502,
        "details": {"status": 500, "request_id": request_id},
    }
    assert_nothing_leaked(stream, service)
    logged = failure_logged(service, request_id)
    assert (logged["kind"], logged["status"], logged["provider_type"]) == ("provider_error", 500, "server_error")
    assert logged["provider_message"] == "Internal error while processing '[sent text]' with Bearer ***"


def test_a_4xx_is_a_refusal_without_the_providers_reason(service, model):
    model.enqueue(error_reply(400, f"Invalid 'messages[1].content': '{PROMPT}' is not allowed.", param="messages"))
    stream, error = ask(service)
    assert error["error_message"] == "The model provider refused the request (HTTP 400)."
    assert error["error_code"] == 502
    assert error["details"] == {"status": 400, "request_id": stream.headers["x-request-id"]}
    assert_nothing_leaked(stream, service)


def test_an_error_in_the_middle_of_the_stream_keeps_the_text_and_leaks_nothing(service, model):
    chunks = stream_reply(text="Once upon a time").chunks(model="test-model")[:3]  # the role, "Once", " upon"
    failure = {"message": f"Upstream died on '{PROMPT}' (key {OTHER_KEY})", "type": "server_error", "code": 500}
    model.enqueue(raw_stream_reply([*chunks, {"error": failure}], done=False))
    stream, error = ask(service)
    request_id = stream.headers["x-request-id"]
    assert "".join(e["content"] for e in stream.events if e["event_name"] == "FINAL_RESPONSE") == "Once upon"
    assert error == {
        "error_message": "The model provider failed while answering.",
        "error_code": 502,
        "details": {"request_id": request_id},  # the HTTP status was 200: nothing to show
    }
    assert_nothing_leaked(stream, service)
    logged = failure_logged(service, request_id)
    assert (logged["kind"], logged["provider_type"], logged["provider_code"]) == ("stream_error", "server_error", "500")
    assert "status" not in logged
    assert logged["provider_message"] == "Upstream died on '[sent text]' (key sk-***)"


def test_a_stalled_provider_did_not_answer_in_time(service, model):
    model.enqueue(stream_reply(text="slow words that never finish", stall_after=3, stall_seconds=10))
    stream, error = ask(service)
    assert error == {
        "error_message": "The model provider did not answer in time.",
        "error_code": 504,
        "details": {"request_id": stream.headers["x-request-id"]},
    }
    assert failure_logged(service, stream.headers["x-request-id"])["kind"] == "timeout"


# In this process: the run's own request id, and the log record itself.


async def run_with_request_id(agent: AbstractAgent, request_id: str) -> tuple[bytes, list[dict[str, Any]]]:
    """One run of `agent` on PROMPT whose request id is `request_id`: its frames, and its errors' contents."""
    run: Run[Any] = Run(
        agent,
        Session.new("test"),
        Query(id=str(ULID()), prompt=PROMPT),
        watcher=RunWatcher(time_limit=10),
        stats=RunStats(request_id),
    )
    try:
        events = await read_to_the_end(run)
    finally:
        run.reader_left()
    assert events[-1].event_name == "done"
    errors = [
        {"error_message": e.content.error_message, "error_code": e.content.error_code, "details": e.content.details}
        for e in events
        if e.event_name == "error"
    ]
    return b"".join(e.sse_frame() for e in events), errors


def assert_record_leaks_nothing(record: logging.LogRecord) -> None:
    """Neither log format writes a key or the prompt."""
    for written in (TextFormatter().format(record), JsonFormatter().format(record)):
        for leak in LEAKS:
            assert leak not in written, leak


async def test_in_process_the_error_carries_the_runs_request_id_and_the_record_masks_the_provider(model, llm_log):
    model.enqueue(error_reply(401, f"Incorrect API key provided: {CONFIGURED_KEY}; prompt was '{PROMPT}'"))
    chat_model = OpenAIChatModel("gpt-test", base_url=model.base_url, api_key=CONFIGURED_KEY, max_retries=0)
    frames, errors = await run_with_request_id(LLMAgent(model=chat_model, system_prompt="Be brief."), "run-req-7")
    assert errors == [
        {
            "error_message": "The model provider rejected the credentials.",
            "error_code": 502,
            "details": {"status": 401, "request_id": "run-req-7"},
        }
    ]
    (record,) = [r for r in llm_log if r.getMessage().startswith("model provider failed")]
    assert record.fields["request_id"] == "run-req-7" and record.fields["kind"] == "credentials"
    assert_record_leaks_nothing(record)
    assert not [leak for leak in LEAKS if leak.encode() in frames]
    # The agent's own line says what the user was told, no more.
    assert [r.getMessage() for r in llm_log if "stopped" in r.getMessage()] == [
        "model gpt-test stopped: The model provider rejected the credentials. (request run-req-7)"
    ]


async def test_an_unreachable_provider_is_a_502_with_the_request_id(llm_log):
    unreachable = f"http://127.0.0.1:{free_port()}/v1"
    chat_model = OpenAIChatModel("gpt-test", base_url=unreachable, api_key=CONFIGURED_KEY, max_retries=0)
    _, errors = await run_with_request_id(LLMAgent(model=chat_model), "run-req-8")
    assert errors == [
        {
            "error_message": "The connection to the model provider failed.",
            "error_code": 502,
            "details": {"request_id": "run-req-8"},
        }
    ]
    (record,) = [r for r in llm_log if r.getMessage().startswith("model provider failed")]
    assert record.fields["kind"] == "connection" and record.fields["cause"].startswith("ClientConnectorError")
