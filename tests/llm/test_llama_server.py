"""The chat agent on a real language model: llama.cpp's OpenAI-compatible server (llama-cpp-python)
running SmolLM2-135M on CPU, started here (tests/support/llama_server.py). Its chunking, timing,
usage and behaviour on a dropped connection are its own, not ours: what /assist, /v1, the CLI
and the playground make of them is what a user of a local model server gets.

Answers are short (MODEL_MAX_TOKENS) and at temperature 0, where the model is deterministic given
what it evaluated last: llama.cpp reuses the prompt of the previous request where the new one
starts the same, and an answer computed after the same prompt (one token left to evaluate) can
differ from one computed after another prompt (several left), as the sums of a batch of one and
of several round differently. So an answer compared with another comes right after a request of
the same prompt (`after_itself`), or, for requests that queue, right after another prompt."""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import orjson
import pytest
from ulid import ULID

from sentient_assist.llm.messages import ChatMessage, TextDelta
from sentient_assist.llm.model import ModelSettings
from sentient_assist.llm.openai_model import OpenAIChatModel
from tests.server.test_stream_guarantees import assert_streams_completed, assert_well_ended
from tests.support.llama_server import MODEL, LlamaServer, llama_missing, running_llama_server
from tests.support.server import ROOT, RunningServer, clean_env, running_server
from tests.support.sse import Frame, Stream, iter_events, new_body, new_session, read_stream
from tests.support.waiting import wait_until

if (missing := llama_missing()) is not None:
    pytest.skip(missing, allow_module_level=True)

pytestmark = pytest.mark.timeout(120)

MAX_TOKENS = 24
LONG = 1500  # tokens: an answer that, run on, would take the model seconds
QUESTION = "What is the capital of France?"
# Each starts with a word of its own: after any other of them, the model evaluates the same
# number of tokens (the prompt from its first word on).
PROMPTS = ["Name a colour.", "Count to three.", "Say hello to Ada.", "Describe the sea."]
OTHER = "Tell me a joke."
ESSAY = "Write a long essay about the history of bread, with many paragraphs."


def chat_env(llama: LlamaServer, max_tokens: int = MAX_TOKENS) -> dict[str, str]:
    return {
        "ASSIST_AGENT": "chat",
        "ASSIST_LOG_LEVEL": "warning",
        "MODEL_BASE_URL": llama.base_url,
        "MODEL_NAME": MODEL,
        "MODEL_TEMPERATURE": "0",
        "MODEL_MAX_TOKENS": str(max_tokens),
    }


@pytest.fixture(scope="module")
def llama() -> Iterator[LlamaServer]:
    """Requests queue: each is answered whole, in turn."""
    with running_llama_server(interrupt_requests=False) as server:
        yield server


@pytest.fixture(scope="module")
def chat(llama: LlamaServer) -> Iterator[RunningServer]:
    with running_server(chat_env(llama)) as server:
        yield server


@pytest.fixture(scope="module")
def long_chat(llama: LlamaServer) -> Iterator[RunningServer]:
    with running_server(chat_env(llama, LONG)) as server:
        yield server


@pytest.fixture(scope="module")
def interrupting_llama() -> Iterator[LlamaServer]:
    """llama.cpp's default: a request that comes while another streams ends that stream."""
    with running_llama_server(interrupt_requests=True) as server:
        yield server


@pytest.fixture(scope="module")
def interrupting_chat(interrupting_llama: LlamaServer) -> Iterator[RunningServer]:
    with running_server(chat_env(interrupting_llama)) as server:
        yield server


@pytest.fixture(scope="module")
def interrupting_long_chat(interrupting_llama: LlamaServer) -> Iterator[RunningServer]:
    with running_server(chat_env(interrupting_llama, LONG)) as server:
        yield server


def answer_of(stream: Stream) -> str:
    return "".join(e["content"] for e in stream.events if e["event_name"] == "FINAL_RESPONSE")


def errors_of(stream: Stream) -> list[dict[str, Any]]:
    return [e["content"] for e in stream.events if e["event_name"] == "error"]


def usage_of(stream: Stream) -> dict[str, int]:
    (usage,) = [e["content"] for e in stream.events if e["event_name"] == "USAGE"]
    return usage


def ask(server: RunningServer, prompt: str, session: dict[str, Any] | None = None) -> Stream:
    stream = read_stream(server.url, new_body(prompt, session), timeout=60)
    assert_well_ended(stream)
    return stream


def answered(server: RunningServer, prompt: str) -> str:
    """The answer of a turn that went well: text, no error, its streams complete, USAGE then done."""
    stream = ask(server, prompt)
    assert errors_of(stream) == []
    assert_streams_completed(stream)
    assert stream.names()[-2:] == ["USAGE", "done"]
    answer = answer_of(stream)
    assert answer.strip(), "an empty answer"
    return answer


def after_itself(chat: RunningServer, prompt: str) -> None:
    """Ask `prompt` once, unread: the model's last prompt is now this one."""
    ask(chat, prompt)


@pytest.fixture(scope="module")
def expected(chat: RunningServer) -> str:
    """QUESTION's answer through /assist, right after QUESTION: what every other face must show."""
    after_itself(chat, QUESTION)
    return answered(chat, QUESTION)


def model_stream(llama: LlamaServer, prompt: str, settings: ModelSettings) -> str:
    """The text of one reply of our model client, talking to the server directly."""

    async def text() -> str:
        model = OpenAIChatModel(MODEL, base_url=llama.base_url)
        try:
            messages = [ChatMessage("user", prompt)]
            return "".join([e.text async for e in model.stream(messages, (), settings) if isinstance(e, TextDelta)])
        finally:
            await model.aclose()

    return asyncio.run(text())


# --- the agent on the real model (item 1)


def test_at_temperature_0_a_streamed_answer_is_the_same_twice(chat, expected):
    after_itself(chat, QUESTION)
    assert answered(chat, QUESTION) == expected


def test_max_tokens_is_honoured_as_the_server_counts_tokens(llama):
    settings = ModelSettings(temperature=0, max_tokens=5)
    model_stream(llama, ESSAY, settings)
    streamed = model_stream(llama, ESSAY, settings)
    told = llama.completion(ESSAY, temperature=0, max_tokens=5)
    assert told["choices"][0]["finish_reason"] == "length" and told["usage"]["completion_tokens"] == 5
    assert streamed == told["choices"][0]["message"]["content"]


def test_a_stop_sequence_ends_the_answer_where_it_would_begin(llama):
    model_stream(llama, ESSAY, ModelSettings(temperature=0, max_tokens=1))
    whole = model_stream(llama, ESSAY, ModelSettings(temperature=0, max_tokens=MAX_TOKENS))
    words = whole.split()
    assert len(words) > 4, whole
    stop = words[3]
    stopped = model_stream(llama, ESSAY, ModelSettings(temperature=0, max_tokens=MAX_TOKENS, stop=(stop,)))
    assert stopped == whole[: whole.index(stop)]


def test_usage_is_what_the_server_reports_and_none_reported_is_0(llama, chat):
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": QUESTION}],
        "stream": True,
        "stream_options": {"include_usage": True},
        "temperature": 0,
        "max_tokens": MAX_TOKENS,
    }
    reported = None
    with httpx.stream("POST", llama.base_url + "/chat/completions", json=body, timeout=60) as response:
        for event in iter_events(response):
            if event.data.startswith("{"):
                reported = orjson.loads(event.data).get("usage") or reported
    usage = usage_of(ask(chat, QUESTION))
    if reported is None:  # llama.cpp's server reports none on a stream: 0, never an estimate
        assert usage == {"requests": 1, "input_tokens": 0, "output_tokens": 0, "total_tokens": 0}
    else:
        assert (usage["input_tokens"], usage["output_tokens"]) == (
            reported["prompt_tokens"],
            reported["completion_tokens"],
        )


def past_turn(prompt: str, stream: Stream) -> dict[str, Any]:
    """A turn as Sentient Chat sends it back in the next request's history."""
    request = {
        "id": str(ULID()),
        "chatId": str(ULID()),
        "content": {"capability": "assist", "request_payload": {"parts": [{"prompt": prompt, "fileIds": []}]}},
    }
    return {"request": {"event": request}, "responses": [{"event": event} for event in stream.events]}


def test_the_history_of_the_chat_reaches_the_model(chat):
    first_prompt = "My name is Zorblax. Remember it."
    first = ask(chat, first_prompt)
    assert errors_of(first) == []
    # The name is only in the first turn: an answer that says it read the history.
    later = ask(chat, "What is my name?", new_session(interactions=[past_turn(first_prompt, first)]))
    assert errors_of(later) == [] and "Zorblax" in answer_of(later)


def test_a_client_that_leaves_stops_the_model_server_generating(llama, long_chat):
    before = llama.disconnects()
    chunks = 0
    with httpx.Client(timeout=60) as client:
        with client.stream("POST", long_chat.url + "/assist", json=new_body(ESSAY)) as response:
            for event in iter_events(response):
                chunks += event.event == "FINAL_RESPONSE"
                if chunks == 3:
                    break  # leaving with the answer under way: the connection closes
    assert chunks == 3
    # The model server's own account: it ended the stream because its client (our service) went.
    assert wait_until(lambda: llama.disconnects() > before, timeout=30), llama.log()[-2000:]
    # And it is free: a request queued behind a run-on answer would wait for its LONG tokens.
    assert llama.completion("Hi", max_tokens=4)["choices"][0]["finish_reason"] in ("length", "stop")


def test_the_model_server_killed_mid_answer_is_an_error_and_done():
    with running_llama_server(interrupt_requests=False) as doomed, running_server(chat_env(doomed, LONG)) as chat:
        killed = threading.Event()

        def kill_at_the_first_text(frame: Frame) -> None:
            if frame.event_name == "FINAL_RESPONSE" and not killed.is_set():
                killed.set()
                doomed.process.kill()

        stream = read_stream(chat.url, new_body(ESSAY), timeout=60, on_frame=kill_at_the_first_text)
    assert killed.is_set()
    assert_well_ended(stream)
    assert_streams_completed(stream)
    (error,) = errors_of(stream)
    assert error["error_code"] == 502 and "model provider" in error["error_message"]
    assert stream.names()[-2:] == ["USAGE", "done"]


def test_four_chats_at_once_all_complete_with_their_own_answers_when_the_server_queues(chat):
    ask(chat, OTHER)
    alone = [answered(chat, prompt) for prompt in PROMPTS]  # each after another prompt
    ask(chat, OTHER)  # and so is each of the four, whatever their order in the server's queue
    with ThreadPoolExecutor(len(PROMPTS)) as pool:
        together = list(pool.map(lambda prompt: answered(chat, prompt), PROMPTS))
    assert together == alone


# --- a stream cut off by the model server (item 5)


def test_an_answer_the_server_interrupts_is_an_error_never_a_silent_partial_one(
    interrupting_llama, interrupting_long_chat
):
    first_text = threading.Event()

    def note(frame: Frame) -> None:
        if frame.event_name == "FINAL_RESPONSE":
            first_text.set()

    with ThreadPoolExecutor(1) as pool:
        interrupted = pool.submit(read_stream, interrupting_long_chat.url, new_body(ESSAY), timeout=60, on_frame=note)
        assert first_text.wait(30)
        # Another request for the model, while the first is streaming: the server ends the first.
        later = interrupting_llama.completion("Hi", max_tokens=4)
        stream = interrupted.result()
    assert later["choices"][0]["finish_reason"] in ("length", "stop")
    assert_well_ended(stream)
    assert_streams_completed(stream)
    assert answer_of(stream)  # what came before the cut reached the client...
    (error,) = errors_of(stream)  # ...and the client is told it is not the whole answer
    assert error["error_code"] == 502 and "cut off" in error["error_message"]
    assert error["details"]["retryable"] is False
    assert stream.names()[-2:] == ["USAGE", "done"]


def test_four_chats_at_once_on_an_interrupting_server_are_each_an_answer_or_an_error(interrupting_chat):
    with ThreadPoolExecutor(len(PROMPTS)) as pool:
        streams = list(pool.map(lambda prompt: ask(interrupting_chat, prompt), PROMPTS))
    cut = 0
    for stream in streams:
        errors = errors_of(stream)
        if not errors:
            assert answer_of(stream).strip(), "an empty answer with no error"
            continue
        cut += 1
        (error,) = errors
        assert error["error_code"] == 502
        # Nothing streamed yet: the client may ask again; text streamed: it may not.
        assert error["details"]["retryable"] is (not answer_of(stream))
    assert cut >= 1  # four requests at once: the server ended some of them


# --- the same model through every face (item 2)


def test_the_v1_face_answers_with_the_model_through_the_openai_sdk(chat, expected):
    import openai

    with openai.OpenAI(base_url=chat.url + "/v1", api_key="unused", max_retries=0, timeout=60) as client:
        messages: Any = [{"role": "user", "content": QUESTION}]
        after_itself(chat, QUESTION)
        stream = client.chat.completions.create(model="chat", messages=messages, stream=True)
        pieces, reasons = [], []
        for chunk in stream:
            for choice in chunk.choices:
                pieces.append(choice.delta.content or "")
                reasons.append(choice.finish_reason)
        after_itself(chat, QUESTION)
        whole = client.chat.completions.create(model="chat", messages=messages)
    assert "".join(pieces) == expected and reasons[-1] == "stop"
    assert whole.choices[0].message.content == expected


def test_the_cli_chat_answers_with_the_model(llama, chat, expected):
    pexpect = pytest.importorskip("pexpect")
    env = {key: value for key, value in chat_env(llama).items() if key != "ASSIST_AGENT"}
    child = pexpect.spawn(
        sys.executable,
        ["-m", "app", "chat", "--agent", "chat"],
        cwd=str(ROOT),
        env=clean_env(env),
        encoding="utf-8",
        timeout=60,
        dimensions=(50, 400),
    )
    try:
        child.expect("you ›")
        after_itself(chat, QUESTION)
        child.sendline(QUESTION)
        child.expect("you ›")
        shown = child.before or ""
        child.sendeof()
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0
    assert " ".join(expected.split()) in " ".join(shown.split()) and "error" not in shown.lower()


def test_the_playground_answers_with_the_model_in_chromium(chat, expected):
    from tests.browser.support import CHROMIUM, CHROMIUM_ARGS, Offline, browser_missing

    if (absent := browser_missing()) is not None:
        pytest.skip(absent)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            offline = Offline(browser, viewport={"width": 1280, "height": 860})
            page = offline.page()
            assert page.goto(chat.url + "/playground").ok
            after_itself(chat, QUESTION)
            page.fill("#prompt", QUESTION)
            page.press("#prompt", "Enter")
            page.wait_for_selector(".turn:last-child .assistant[data-state=done]", timeout=60_000)
            shown = page.locator(".turn:last-child .assistant").inner_text()
            # The server reports no usage on a stream: said so, never "0 tokens".
            usage = page.locator(".turn:last-child .usage").inner_text()
            offline.context.close()
        finally:
            browser.close()
    assert offline.outside == [] and offline.errors == []
    assert " ".join(expected.split()) in " ".join(shown.split())  # with the turn's other events
    assert usage == "USAGE · 1 request · tokens not reported"
