"""OpenAIChatModel reading the stream itself (aiohttp): the SSE it must understand, what it sends,
how it decides to retry, and that its connections close with their event loop. The provider is
the real HTTP server of tests/support."""

from __future__ import annotations

import asyncio
import gc
import logging
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import pytest

from sentient_assist.llm import openai_model
from sentient_assist.llm.messages import ChatMessage, TextDelta
from sentient_assist.llm.model import ModelSettings
from sentient_assist.llm.openai_model import OpenAIChatModel
from sentient_assist.runtime.errors import ModelProviderError
from tests.support.openai_server import error_reply, raw_stream_reply, stream_reply
from tests.support.waiting import until

HELLO = [ChatMessage(role="user", content="Hello")]


def delta(text: str, finish_reason: str | None = None) -> dict[str, object]:
    return {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": finish_reason}]}


async def text_of(chat_model: OpenAIChatModel) -> str:
    return "".join([e.text async for e in chat_model.stream(HELLO, (), ModelSettings()) if isinstance(e, TextDelta)])


async def test_an_event_split_over_data_lines_comments_and_other_fields_are_read_as_sse(model):
    model.enqueue(
        raw_stream_reply(
            [
                '{"choices": [{"index": 0,\ndata:  "delta": {"content": "Hi"}}]}',  # one event, two data: lines
                '{"choices": []}\n\n: keep-alive\nevent: message',  # a comment, then a field of the next event
                delta(" there", "stop"),  # the last text and the finish_reason in one chunk, as Ollama sends them
            ]
        )
    )
    assert await text_of(OpenAIChatModel("gpt-test", base_url=model.base_url)) == "Hi there"


Answer = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@asynccontextmanager
async def serving(answer: Answer) -> AsyncIterator[str]:
    """A provider on a loopback port, `answer` serving each of its connections: its base URL.
    Every connection is closed before it ends (before the test's loop does)."""
    answering: set[asyncio.Task[object]] = set()

    async def tracked(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        answering.add(asyncio.current_task())  # type: ignore[arg-type]
        await answer(reader, writer)

    server = await asyncio.start_server(tracked, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        yield f"http://127.0.0.1:{port}/v1"
        await asyncio.gather(*answering)


async def read_request(reader: asyncio.StreamReader) -> bytes:
    """One request off the connection: its head (request line and headers), its body read past."""
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(int(h.split(b":")[1]) for h in head.lower().split(b"\r\n") if h.startswith(b"content-length"))
    await reader.readexactly(length)
    return head


@asynccontextmanager
async def provider_writing(*writes: bytes, heads: list[bytes] | None = None) -> AsyncIterator[str]:
    """A provider that answers any request with a 200 event stream written as `writes`, each
    its own TCP write a moment after the last, then closes: lines and events cut anywhere.
    Each request's head (request line and headers) is added to `heads`."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await read_request(reader)
            if heads is not None:
                heads.append(head)
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n")
            for piece in writes:
                writer.write(piece)
                await writer.drain()
                await asyncio.sleep(0.02)
        except ConnectionError:
            pass  # the client gave up first
        finally:
            writer.close()

    async with serving(answer) as base_url:
        yield base_url


def data(text: str) -> bytes:
    return b'data: {"choices":[{"index":0,"delta":{"content":"' + text.encode() + b'"}}]}'


FINISHED = b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'


async def test_events_cut_anywhere_by_the_network_crlf_lines_and_a_last_event_without_its_blank_line_are_read():
    first, second = data("Hel"), data("lo")
    last = FINISHED.removesuffix(b"\n\n")
    writes = [first[:9], first[9:] + b"\r", b"\n\r\n" + second[:3], second[3:] + b"\n", b": ping\n\n", data("!")]
    writes += [b"\n\n" + last]
    async with provider_writing(*writes) as base_url:
        chat_model = OpenAIChatModel("gpt-test", base_url=base_url)
        events = [e async for e in chat_model.stream(HELLO, (), ModelSettings())]
        await chat_model.aclose()
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["Hel", "lo", "!"]


@asynccontextmanager
async def provider_closing_kept_connections(connections: list[int]) -> AsyncIterator[str]:
    """A provider whose every connection answers its first request in full and stays open
    (keep-alive), then is closed, unanswered, when a second request arrives on it: what a model
    server's idle timeout does to a pooled connection taken just as it ends. `connections` gets,
    per connection, how many requests it answered."""

    body = data("Hi") + b"\n\n" + FINISHED + b"data: [DONE]\n\n"

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(0)
        try:
            while True:
                await read_request(reader)
                if connections[-1]:
                    return  # the second request on this connection: closed without a byte
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n")
                writer.write(b"content-length: %d\r\n\r\n" % len(body) + body)
                await writer.drain()
                connections[-1] += 1
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async with serving(answer) as base_url:
        yield base_url


async def test_a_kept_connection_the_provider_closes_as_it_is_reused_is_sent_again_on_a_new_one():
    # max_retries=0: no retry of the backoff's; the request is resent once, at once, all the same.
    connections: list[int] = []
    async with provider_closing_kept_connections(connections) as base_url:
        chat_model = OpenAIChatModel("gpt-test", base_url=base_url, max_retries=0)
        answers = [await text_of(chat_model) for _ in range(3)]
        await chat_model.aclose()
    assert answers == ["Hi", "Hi", "Hi"]
    # Each answer after the first: its request was dropped on the kept connection, then answered on a new one.
    assert connections == [1, 1, 1]


async def test_a_provider_that_closes_every_connection_unanswered_is_a_connection_failure(llm_log):
    closed: list[int] = []

    async def close_at_once(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        closed.append(1)
        writer.close()

    async with serving(close_at_once) as base_url:
        chat_model = OpenAIChatModel("gpt-test", base_url=base_url, max_retries=0)
        with pytest.raises(ModelProviderError) as raised:
            await text_of(chat_model)
        await chat_model.aclose()
    assert str(raised.value) == "The connection to the model provider failed."
    assert len(closed) == 2  # the request, and once more on a new connection: no more


async def test_text_read_together_with_a_failure_after_it_still_comes_first(llm_log):
    error = b'data: {"error":{"message":"overloaded","type":"server_error"}}\n\n'
    async with provider_writing(data("Hi") + b"\n\n" + data(" there") + b"\n\n" + error) as base_url:
        chat_model = OpenAIChatModel("gpt-test", base_url=base_url)
        texts: list[str] = []
        with pytest.raises(ModelProviderError) as caught:
            async for event in chat_model.stream(HELLO, (), ModelSettings()):
                texts.append(event.text)  # type: ignore[union-attr]
        await chat_model.aclose()
    assert texts == ["Hi", " there"] and caught.value.error_code == 502
    assert llm_log[0].fields["provider_message"] == "overloaded"


async def test_a_line_longer_than_the_limit_is_a_failure_not_a_buffer_that_grows(monkeypatch, llm_log):
    monkeypatch.setattr(openai_model, "_MAX_LINE", 1000)
    async with provider_writing(data("Hi") + b"\n\n", b"data: " + b"x" * 600, b"x" * 600, b"\n\n") as base_url:
        chat_model = OpenAIChatModel("gpt-test", base_url=base_url)
        with pytest.raises(ModelProviderError):
            await text_of(chat_model)
        await chat_model.aclose()
    assert "a line of more than 1000 bytes" in llm_log[0].fields["provider_message"]


async def test_the_proxy_in_the_environment_is_used_and_no_proxy_is_obeyed(monkeypatch):
    heads: list[bytes] = []
    async with provider_writing(data("via proxy") + b"\n\n" + FINISHED, heads=heads) as proxy_url:
        proxy = proxy_url.removesuffix("/v1")
        monkeypatch.setenv("HTTP_PROXY", proxy)
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        # No such host: only a proxy can answer for it.
        proxied = OpenAIChatModel("gpt-test", base_url="http://model.invalid/v1")
        assert await text_of(proxied) == "via proxy"
        await proxied.aclose()
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        direct = OpenAIChatModel("gpt-test", base_url=proxy_url)  # the same server, reached directly
        assert await text_of(direct) == "via proxy"
        await direct.aclose()
    assert heads[0].startswith(b"POST http://model.invalid/v1/chat/completions HTTP/1.1")
    assert heads[1].startswith(b"POST /v1/chat/completions HTTP/1.1")


async def test_an_event_that_is_not_json_is_a_failure_while_answering(model, llm_log):
    model.enqueue(raw_stream_reply([delta("Hi"), "<html>bad gateway</html>"], done=False))
    with pytest.raises(ModelProviderError) as caught:
        await text_of(OpenAIChatModel("gpt-test", base_url=model.base_url))
    assert (caught.value.message, caught.value.error_code) == ("The model provider failed while answering.", 502)
    (record,) = llm_log
    assert record.fields["kind"] == "stream_error" and "not JSON" in record.fields["provider_message"]


async def test_without_a_key_no_authorization_is_sent_and_with_one_it_is_a_bearer(model):
    model.enqueue("one", "two")
    await text_of(OpenAIChatModel("gpt-test", base_url=model.base_url))
    await text_of(OpenAIChatModel("gpt-test", base_url=model.base_url + "/", api_key="sk-abc"))
    without, with_key = model.completion_requests
    assert "authorization" not in without.headers and with_key.authorization == "Bearer sk-abc"
    assert with_key.path == "/v1/chat/completions"
    assert with_key.body["stream"] is True and with_key.body["stream_options"] == {"include_usage": True}


async def test_x_should_retry_false_is_obeyed_and_a_408_is_retried(model):
    model.enqueue(error_reply(500, "no", headers={"x-should-retry": "false"}))
    with pytest.raises(ModelProviderError) as caught:
        await text_of(OpenAIChatModel("gpt-test", base_url=model.base_url, max_retries=2))
    assert caught.value.details["status"] == 500 and len(model.completion_requests) == 1
    model.reset()
    model.enqueue(error_reply(408, "slow", headers={"retry-after-ms": "1"}), "fine")
    assert await text_of(OpenAIChatModel("gpt-test", base_url=model.base_url, max_retries=1)) == "fine"
    assert len(model.completion_requests) == 2


class Caught(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def test_one_model_in_several_loops_and_collected_in_a_running_one_leaves_no_session_open(model):
    model.enqueue(*[stream_reply(text="word") for _ in range(3)])
    chat_model = OpenAIChatModel("gpt-test", base_url=model.base_url)

    async def collected_while_the_loop_runs() -> None:
        in_a_cycle = OpenAIChatModel("gpt-test", base_url=model.base_url)
        in_a_cycle.itself = in_a_cycle  # type: ignore[attr-defined]  # only the cycle collector frees it
        await text_of(in_a_cycle)
        del in_a_cycle
        gc.collect()
        # The session closes in a task of this loop: until it has run, and nothing else is left.
        assert await until(lambda: not asyncio.all_tasks() - {asyncio.current_task()}, 5)

    asyncio_log = Caught()
    logging.getLogger("asyncio").addHandler(asyncio_log)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert asyncio.run(text_of(chat_model)) == "word"
            assert asyncio.run(text_of(chat_model)) == "word"  # a new loop: a new session, the old one closed
            asyncio.run(collected_while_the_loop_runs())
            asyncio.run(chat_model.aclose())
            del chat_model
            gc.collect()
    finally:
        logging.getLogger("asyncio").removeHandler(asyncio_log)
    assert [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)] == []
    assert [m for m in asyncio_log.messages if "Unclosed" in m or "never" in m] == []


ROLE_ONLY = {"choices": [{"index": 0, "delta": {"role": "assistant"}, "finish_reason": None}]}


async def test_a_stream_that_ends_without_a_finish_reason_is_cut_off_retryable_only_before_any_text(model, llm_log):
    # What llama.cpp's server sends for a request it interrupts: the role chunk, then [DONE].
    model.enqueue(raw_stream_reply([ROLE_ONLY]), raw_stream_reply([ROLE_ONLY, delta("Half an")]))
    with pytest.raises(ModelProviderError) as before:
        await text_of(OpenAIChatModel("gpt-test", base_url=model.base_url))
    assert before.value.error_code == 502 and before.value.details["retryable"] is True
    assert before.value.message.startswith("The model provider ")
    texts: list[str] = []
    with pytest.raises(ModelProviderError) as during:
        async for event in OpenAIChatModel("gpt-test", base_url=model.base_url).stream(HELLO, (), ModelSettings()):
            texts.append(event.text)  # type: ignore[union-attr]
    assert texts == ["Half an"] and during.value.details["retryable"] is False
    assert "cut off" in during.value.message
    assert [r.fields["kind"] for r in llm_log] == ["cut_off", "cut_off"]
