"""The assistant agent served by a real uvicorn, its model a real HTTP server speaking the
OpenAI streaming format: the Sentient events that reach an /assist client, and the AgentResult
the facade reads from them."""

from __future__ import annotations

import json

import pytest

from sentient_assist import Agent
from tests.server.test_stream_guarantees import assert_streams_completed, assert_well_ended
from tests.support.openai_server import error_reply, stream_reply
from tests.support.sse import new_body, read_stream

SECRET_KEY = "sk-test-0123456789-secret"


@pytest.fixture(scope="module")
def assistant_server(serve, model_server):
    env = {
        "ASSIST_AGENT": "assistant",
        "MODEL_BASE_URL": model_server.base_url,
        "MODEL_API_KEY": SECRET_KEY,
        "MODEL_NAME": "test-model",
        "MODEL_TIMEOUT": "1",
        "MODEL_TEMPERATURE": "0.2",
    }
    return serve(env)


def assert_no_secret(stream, server) -> None:
    assert SECRET_KEY.encode() not in stream.raw
    assert SECRET_KEY not in server.log()


def test_reasoning_text_before_tools_parallel_split_calls_and_usage(assistant_server, model):
    model.enqueue(
        stream_reply(
            reasoning="The time and a product.",
            text="Let me check.",
            tool_calls=[
                ("call_a", "current_time", {"time_zone": "Europe/Paris"}),
                ("call_b", "calculate", {"expression": "6 * 7"}),
            ],
            argument_pieces=12,
            usage=(100, 20),
        ),
        stream_reply(text="In Paris it is noon, and 6 * 7 is 42.", usage=(150, 15)),
    )
    stream = read_stream(assistant_server.url, new_body("What time is it in Paris, and what is 6 * 7?"))
    assert_well_ended(stream)
    assert_streams_completed(stream)
    names = stream.names()
    assert (
        names.index("THINKING") < names.index("FINAL_RESPONSE") < names.index("TOOL_CALL") < names.index("TOOL_RESULT")
    )
    calls = [e["content"] for e in stream.events if e["event_name"] == "TOOL_CALL"]
    assert calls == [
        {"id": "call_a", "name": "current_time", "arguments": {"time_zone": "Europe/Paris"}},
        {"id": "call_b", "name": "calculate", "arguments": {"expression": "6 * 7"}},
    ]
    results = {e["content"]["id"]: e["content"] for e in stream.events if e["event_name"] == "TOOL_RESULT"}
    assert results["call_b"]["result"] == 42 and results["call_b"]["error"] is None
    assert results["call_a"]["result"].startswith("20")
    answer = "".join(e["content"] for e in stream.events if e["event_name"] == "FINAL_RESPONSE")
    assert answer == "Let me check.\n\nIn Paris it is noon, and 6 * 7 is 42."
    usage = next(e["content"] for e in stream.events if e["event_name"] == "USAGE")
    assert usage == {"requests": 2, "input_tokens": 250, "output_tokens": 35, "total_tokens": 285}
    assert names[-2:] == ["USAGE", "done"]

    first, second = model.completion_requests
    assert first.authorization == f"Bearer {SECRET_KEY}"
    assert first.body["model"] == "test-model" and first.body["stream_options"] == {"include_usage": True}
    assert first.body["temperature"] == 0.2
    assert {t["function"]["name"] for t in first.body["tools"]} == {"current_time", "calculate"}
    tool_messages = [m for m in second.messages if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_messages] == ["call_a", "call_b"]
    assert json.loads(tool_messages[1]["content"]) == 42
    assert second.messages[2]["tool_calls"][0]["function"]["arguments"] == '{"time_zone": "Europe/Paris"}'
    assert_no_secret(stream, assistant_server)


async def test_the_facade_reads_the_same_run_into_an_agent_result(assistant_server, model):
    model.enqueue(
        stream_reply(
            reasoning="Hmm.",
            reasoning_field="reasoning",
            text="Computing.",
            tool_calls=[("c1", "calculate", {"expression": "2 ** 8"})],
            usage=(10, 5),
        ),
        stream_reply(text="256.", usage=(20, 2)),
    )
    result = await Agent(assistant_server.url + "/assist").run("2 ** 8?")
    assert result.text == "Computing.\n\n256."
    assert [(c.id, c.name, c.arguments, c.result, c.error) for c in result.tool_calls] == [
        ("c1", "calculate", {"expression": "2 ** 8"}, 256, None)
    ]
    assert (result.usage.requests, result.usage.total_tokens) == (2, 37)
    assert result.errors == ()


async def test_a_second_turn_sends_the_first_to_the_model(assistant_server, model):
    model.enqueue(stream_reply(text="Hello Ann."), stream_reply(text="Your name is Ann."))
    agent = Agent(assistant_server.url + "/assist")
    first = await agent.run("I am Ann.")
    second = await agent.run("What is my name?", history=first.messages)
    assert second.text == "Your name is Ann."
    sent = [(m["role"], m["content"]) for m in model.completion_requests[1].messages]
    assert sent[1:] == [("user", "I am Ann."), ("assistant", "Hello Ann."), ("user", "What is my name?")]


def test_a_429_then_success_is_retried_before_the_first_token(assistant_server, model):
    model.enqueue(
        error_reply(429, "Rate limit reached", headers={"retry-after-ms": "1"}), stream_reply(text="Fine now.")
    )
    stream = read_stream(assistant_server.url, new_body("hi"))
    assert_well_ended(stream)
    assert "error" not in stream.names()
    assert len(model.completion_requests) == 2


def test_a_429_that_persists_is_a_429_error_with_the_retry_hint(assistant_server, model):
    limited = error_reply(429, "Rate limit reached", headers={"retry-after-ms": "1", "retry-after": "1"})
    model.enqueue(limited, limited, limited)
    stream = read_stream(assistant_server.url, new_body("hi"))
    assert_well_ended(stream)
    error = next(e["content"] for e in stream.events if e["event_name"] == "error")
    assert error["error_code"] == 429 and error["details"] == {
        "status": 429,
        "request_id": stream.headers["x-request-id"],
        "retry_after": "1",
        "retry_after_ms": "1",
    }


def test_rejected_credentials_are_a_502_that_says_so_without_the_key(assistant_server, model):
    model.enqueue(error_reply(401, f"Incorrect API key provided: {SECRET_KEY}"))
    stream = read_stream(assistant_server.url, new_body("hi"))
    assert_well_ended(stream)
    error = next(e["content"] for e in stream.events if e["event_name"] == "error")
    assert error["error_code"] == 502 and "rejected the credentials" in error["error_message"]
    assert_no_secret(stream, assistant_server)


def test_a_500_in_the_middle_of_a_stream_keeps_the_text_and_ends_with_error_usage_done(assistant_server, model):
    model.enqueue(stream_reply(text="one two three four five six", fail_after=4))
    stream = read_stream(assistant_server.url, new_body("count"))
    assert_well_ended(stream)
    assert_streams_completed(stream)
    answer = "".join(e["content"] for e in stream.events if e["event_name"] == "FINAL_RESPONSE")
    assert answer and "six" not in answer
    assert stream.names()[-3:] == ["error", "USAGE", "done"]
    assert stream.events[-3]["content"]["error_code"] == 502


def test_a_stalled_stream_is_a_504(assistant_server, model):
    model.enqueue(stream_reply(text="slow words that never finish", stall_after=3, stall_seconds=10))
    stream = read_stream(assistant_server.url, new_body("stall"))
    assert_well_ended(stream)
    error = next(e["content"] for e in stream.events if e["event_name"] == "error")
    assert error["error_code"] == 504
