"""The loopback OpenAI server of tests/support, driven by the real `openai.AsyncOpenAI` client."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import time

import httpx
import openai
import pytest
from openai import AsyncOpenAI

from tests.support.openai_server import (
    MID_STREAM_ERROR_MESSAGE,
    NO_SCRIPTED_REPLY,
    FakeOpenAI,
    error_reply,
    raw_stream_reply,
    stream_reply,
)

API_KEY = "sk-test-key"
MESSAGES = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Hi"},
]


@pytest.fixture
def server():
    with FakeOpenAI() as fake:
        yield fake


def client_for(server: FakeOpenAI, **kwargs) -> AsyncOpenAI:
    kwargs.setdefault("max_retries", 0)
    return AsyncOpenAI(base_url=server.base_url, api_key=API_KEY, **kwargs)


async def open_stream(client: AsyncOpenAI, **kwargs):
    return await client.chat.completions.create(
        model=kwargs.pop("model", "gpt-test"),
        messages=kwargs.pop("messages", MESSAGES),
        stream=True,
        stream_options={"include_usage": True},
        **kwargs,
    )


async def collect(stream) -> list:
    return [chunk async for chunk in stream]


async def test_text_stream_reassembles_and_ends_with_usage(server):
    text = "Hello there, general Kenobi.\nA second line."
    server.enqueue(stream_reply(text=text, usage=(30, 9)))
    async with client_for(server) as client:
        chunks = await collect(await open_stream(client, model="my-model"))

    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert content == text
    assert chunks[0].choices[0].delta.role == "assistant"
    assert len([c for c in chunks if c.choices and c.choices[0].delta.content]) > 3  # word by word
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].choices == []
    assert chunks[-1].usage is not None
    assert (chunks[-1].usage.prompt_tokens, chunks[-1].usage.completion_tokens, chunks[-1].usage.total_tokens) == (
        30,
        9,
        39,
    )
    assert {c.id for c in chunks} == {chunks[0].id} and chunks[0].id.startswith("chatcmpl-")
    assert {c.model for c in chunks} == {"my-model"}
    assert all(c.object == "chat.completion.chunk" for c in chunks)


async def test_usage_only_when_asked_and_text_pieces(server):
    server.enqueue(stream_reply(text="abcdefghij", text_pieces=3))
    async with client_for(server) as client:
        stream = await client.chat.completions.create(model="m", messages=MESSAGES, stream=True)
        chunks = await collect(stream)
    pieces = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
    assert pieces == ["abcd", "efg", "hij"]
    assert all(c.usage is None and c.choices for c in chunks)


async def test_reasoning_deltas_are_readable(server):
    server.enqueue(
        stream_reply(reasoning="Think it through.", text="Answer."),
        stream_reply(reasoning="Other way.", reasoning_field="reasoning", text="Ok."),
    )
    async with client_for(server) as client:
        first = await collect(await open_stream(client))
        second = await collect(await open_stream(client))

    def joined(chunks, field):
        return "".join((c.choices[0].delta.model_extra or {}).get(field) or "" for c in chunks if c.choices)

    assert joined(first, "reasoning_content") == "Think it through."
    assert "".join(getattr(c.choices[0].delta, "reasoning_content", None) or "" for c in first if c.choices) == (
        "Think it through."
    )
    assert "".join(c.choices[0].delta.content or "" for c in first if c.choices) == "Answer."
    # reasoning comes before the text
    kinds = [
        "r" if (c.choices[0].delta.model_extra or {}).get("reasoning_content") else "t"
        for c in first
        if c.choices and ((c.choices[0].delta.model_extra or {}).get("reasoning_content") or c.choices[0].delta.content)
    ]
    assert kinds == sorted(kinds)  # "r"... then "t"...
    assert joined(second, "reasoning") == "Other way."
    assert joined(second, "reasoning_content") == ""


async def test_parallel_tool_calls_interleave_and_reassemble(server):
    weather = {"city": "Zürich", "units": "metric", "days": [1, 2, 3]}
    search = {"query": 'quoted "text" and \\ backslash', "limit": 5}
    server.enqueue(
        stream_reply(
            text="Let me check.",
            tool_calls=[("call_a1", "get_weather", weather), ("call_b2", "web_search", search)],
            argument_pieces=5,
        )
    )
    async with client_for(server) as client:
        chunks = await collect(await open_stream(client))

    calls: dict[int, dict] = {}
    order: list[int] = []
    for chunk in chunks:
        if not chunk.choices or not chunk.choices[0].delta.tool_calls:
            continue
        for delta in chunk.choices[0].delta.tool_calls:
            call = calls.setdefault(delta.index, {"id": None, "name": "", "arguments": ""})
            if delta.id:
                assert call["id"] is None  # the id arrives once, in the call's first delta
                call["id"] = delta.id
                assert delta.type == "function"
            if delta.function and delta.function.name:
                call["name"] += delta.function.name
            if delta.function and delta.function.arguments:
                call["arguments"] += delta.function.arguments
                order.append(delta.index)

    assert calls[0] == {"id": "call_a1", "name": "get_weather", "arguments": json.dumps(weather, ensure_ascii=False)}
    assert calls[1] == {"id": "call_b2", "name": "web_search", "arguments": json.dumps(search, ensure_ascii=False)}
    assert json.loads(calls[0]["arguments"]) == weather and json.loads(calls[1]["arguments"]) == search
    assert order[:4] == [0, 1, 0, 1]  # interleaved, as parallel calls can arrive
    assert order.count(0) == 5 and order.count(1) == 5
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "tool_calls"
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "Let me check."


async def test_401_raises_authentication_error(server):
    server.enqueue(error_reply(401, "Incorrect API key provided: sk-test***-key."))
    async with client_for(server, max_retries=2) as client:
        with pytest.raises(openai.AuthenticationError) as caught:
            await open_stream(client)
    assert caught.value.status_code == 401
    assert caught.value.code == "invalid_api_key"
    assert caught.value.type == "invalid_request_error"
    assert "Incorrect API key" in caught.value.message
    assert caught.value.request_id and caught.value.request_id.startswith("req_")
    assert len(server.requests) == 1  # 401 is not retried


async def test_429_then_success_is_retried(server):
    server.enqueue(
        error_reply(429, "Rate limit reached for requests", headers={"retry-after": "0"}),
        stream_reply(text="after the retry"),
    )
    async with client_for(server, max_retries=1) as client:
        started = time.monotonic()
        chunks = await collect(await open_stream(client))
        elapsed = time.monotonic() - started

    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "after the retry"
    requests = server.requests
    assert len(requests) == 2
    assert requests[0].body == requests[1].body
    assert requests[0].headers.get("x-stainless-retry-count") == "0"
    assert requests[1].headers.get("x-stainless-retry-count") == "1"
    # retry-after: 0 is not honoured (only 0 < delay <= 120 is); the default backoff applies
    assert 0.3 < elapsed < 3.0


async def test_429_without_retries_raises_rate_limit_error(server):
    server.enqueue(error_reply(429, "Rate limit reached", headers={"retry-after-ms": "1"}))
    async with client_for(server, max_retries=0) as client:
        with pytest.raises(openai.RateLimitError) as caught:
            await open_stream(client)
    assert caught.value.code == "rate_limit_exceeded"
    assert caught.value.response.headers["retry-after-ms"] == "1"


async def test_mid_stream_error_raises_api_error_after_text(server):
    server.enqueue(stream_reply(text="one two three four five six", fail_after=4))
    received = ""
    async with client_for(server, max_retries=2) as client:
        stream = await open_stream(client)
        with pytest.raises(openai.APIError) as caught:
            async for chunk in stream:
                if chunk.choices:
                    received += chunk.choices[0].delta.content or ""

    assert received == "one two three"  # role chunk + 3 words, then the error event
    error = caught.value
    assert not isinstance(error, openai.APIStatusError)
    assert error.message == MID_STREAM_ERROR_MESSAGE
    assert error.body == {"message": MID_STREAM_ERROR_MESSAGE, "type": "server_error", "code": 500}
    assert error.type == "server_error" and error.code == "500"
    assert len(server.requests) == 1  # not retried


async def test_stall_raises_timeout_quickly(server):
    server.enqueue(stream_reply(text="a b c d e f", stall_after=3, stall_seconds=30.0))
    received = ""
    async with client_for(server, timeout=1.0, max_retries=2) as client:
        started = time.monotonic()
        stream = await open_stream(client)
        with pytest.raises(openai.APITimeoutError):
            async for chunk in stream:
                if chunk.choices:
                    received += chunk.choices[0].delta.content or ""
        elapsed = time.monotonic() - started
    assert received == "a b"
    assert 0.9 < elapsed < 4.0
    assert len(server.requests) == 1  # a stall inside the body is not retried


async def test_stalled_handler_does_not_block_others_or_exit():
    started = time.monotonic()
    with FakeOpenAI() as server:
        server.enqueue(stream_reply(text="x y", stall_after=1, stall_seconds=60.0), stream_reply(text="fine"))
        async with client_for(server, timeout=5.0) as client:
            stalled = await open_stream(client)  # headers + role chunk arrive, then nothing
            first = await stalled.__anext__()
            assert first.choices[0].delta.role == "assistant"
            chunks = await collect(await open_stream(client))  # served while the other stalls
            assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "fine"
            await stalled.close()
    assert time.monotonic() - started < 5.0


async def test_request_is_recorded(server):
    server.enqueue(stream_reply(text="ok"))
    tools = [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
            },
        }
    ]
    messages = [
        *MESSAGES,
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
    ]
    async with client_for(server) as client:
        await collect(
            await open_stream(
                client, model="gpt-x", messages=messages, tools=tools, temperature=0.2, max_completion_tokens=64
            )
        )

    (request,) = server.requests
    assert request.method == "POST" and request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == f"Bearer {API_KEY}" == request.authorization
    assert request.headers["content-type"] == "application/json"
    body = request.body
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["model"] == "gpt-x" and body["temperature"] == 0.2 and body["max_completion_tokens"] == 64
    assert body["tools"] == tools
    assert body["messages"] == messages == request.messages
    assert server.completion_requests == [request]


async def test_empty_queue_answers_500(server):
    async with client_for(server) as client:
        with pytest.raises(openai.InternalServerError) as caught:
            await open_stream(client)
    assert NO_SCRIPTED_REPLY in caught.value.message
    assert server.pending == 0 and len(server.requests) == 1


async def test_unstreamed_request_gets_one_completion(server):
    server.enqueue(stream_reply(text="whole answer", tool_calls=[("call_9", "f", {"a": 1})], usage=(3, 4)))
    async with client_for(server) as client:
        completion = await client.chat.completions.create(model="m", messages=MESSAGES)
    message = completion.choices[0].message
    assert message.content == "whole answer"
    assert message.tool_calls[0].id == "call_9" and json.loads(message.tool_calls[0].function.arguments) == {"a": 1}
    assert completion.choices[0].finish_reason == "tool_calls"
    assert completion.usage.total_tokens == 7


async def test_raw_events_and_reset(server):
    server.enqueue(
        raw_stream_reply(
            [
                {
                    "id": "x",
                    "object": "chat.completion.chunk",
                    "created": 1,
                    "model": "m",
                    "choices": [{"index": 0, "delta": {"content": "raw"}, "finish_reason": "stop"}],
                }
            ]
        ),
        stream_reply(text="never"),
    )
    async with client_for(server) as client:
        chunks = await collect(await open_stream(client))
    assert [c.choices[0].delta.content for c in chunks] == ["raw"]
    assert server.pending == 1
    server.reset()
    assert server.pending == 0 and server.requests == []


def test_reachable_with_plain_httpx_from_another_thread(server):
    # What a separate process sees: plain HTTP on loopback, chunked SSE ending in [DONE].
    server.enqueue(stream_reply(text="hi", usage=None))
    with httpx.Client() as client:
        with client.stream(
            "POST", f"{server.base_url}/chat/completions", json={"model": "m", "messages": [], "stream": True}
        ) as response:
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            assert response.headers["transfer-encoding"] == "chunked"
            lines = [line for line in response.iter_lines() if line]
    assert lines[-1] == "data: [DONE]"
    assert all(line.startswith("data: ") for line in lines)
    assert server.wait_for_requests(1, timeout=1.0)[0].body["model"] == "m"


async def test_events_arrive_as_they_are_sent(server):
    server.enqueue(stream_reply(text="a b c d", delay=0.15, usage=None))
    arrivals = []
    async with client_for(server) as client:
        stream = await open_stream(client)
        async for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                arrivals.append(time.monotonic())
    assert len(arrivals) == 4
    gaps = [later - earlier for earlier, later in itertools.pairwise(arrivals)]
    assert all(gap > 0.1 for gap in gaps)  # not buffered until the end


def test_reachable_from_another_process(server):
    server.enqueue(stream_reply(text="from a subprocess", usage=(5, 3)))
    script = (
        "import sys, openai\n"
        "client = openai.OpenAI(base_url=sys.argv[1], api_key='sk-sub', max_retries=0, timeout=10)\n"
        "stream = client.chat.completions.create(model='sub', messages=[{'role': 'user', 'content': 'hi'}],\n"
        "    stream=True, stream_options={'include_usage': True})\n"
        "chunks = list(stream)\n"
        "print(''.join(c.choices[0].delta.content or '' for c in chunks if c.choices), chunks[-1].usage.total_tokens)\n"
    )
    result = subprocess.run([sys.executable, "-c", script, server.base_url], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "from a subprocess 8"
    assert server.requests[0].authorization == "Bearer sk-sub"
