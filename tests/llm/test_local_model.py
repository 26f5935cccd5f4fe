"""LocalChatModel: SmolLM2-135M run in this process by llama.cpp (the `local` extra), and the chat
agent served on it with MODEL_NAME=local: no server, no key, no network.

Answers compared with each other come right after the same prompt: llama.cpp reuses the prompt it
evaluated last, and at temperature 0 an answer can differ with how much of it was left to
evaluate (tests/llm/test_llama_server.py says more)."""

from __future__ import annotations

import asyncio
import sys
import threading

import pytest

from sentient_assist.llm import local_model
from sentient_assist.llm.local_model import LocalChatModel, default_gguf_path
from sentient_assist.llm.messages import ChatMessage, TextDelta, ToolSpec
from sentient_assist.llm.model import ModelSettings
from sentient_assist.protocol.conventions import TokenUsage
from sentient_assist.runtime.errors import ModelProviderError, SettingsError
from sentient_assist.server.settings import Settings
from tests.server.test_stream_guarantees import assert_streams_completed, assert_well_ended
from tests.support.llama_server import llama_missing
from tests.support.server import running_server
from tests.support.sse import new_body, read_stream
from tests.support.waiting import wait_until

pytestmark = pytest.mark.timeout(120)

needs_the_model = pytest.mark.skipif((missing := llama_missing()) is not None, reason=str(missing))

QUESTION = [ChatMessage("user", "What is the capital of France?")]
ESSAY = [ChatMessage("user", "Write a long essay about the history of bread, with many paragraphs.")]
GREEDY = ModelSettings(temperature=0, max_tokens=16)


def generating() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("local-model-")]


async def events_of(model: LocalChatModel, messages: list[ChatMessage], settings: ModelSettings) -> list[object]:
    return [event async for event in model.stream(messages, (), settings)]


def text_of(events: list[object]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


@needs_the_model
async def test_a_reply_streams_in_pieces_then_its_usage_the_same_twice_at_temperature_0():
    model = LocalChatModel()
    await events_of(model, QUESTION, GREEDY)
    first = await events_of(model, QUESTION, GREEDY)
    texts = [e.text for e in first if isinstance(e, TextDelta)]
    assert len(texts) > 1 and "".join(texts).strip()
    assert first[-1] == TokenUsage()  # llama.cpp reports no counts on a stream: 0, unreported
    assert await events_of(model, QUESTION, GREEDY) == first
    assert model.name == "SmolLM2-135M-Instruct.Q4_1"


@needs_the_model
async def test_max_tokens_and_stop_sequences_are_honoured():
    model = LocalChatModel()
    await events_of(model, ESSAY, ModelSettings(temperature=0, max_tokens=1))
    short = text_of(await events_of(model, ESSAY, ModelSettings(temperature=0, max_tokens=3)))
    longer = text_of(await events_of(model, ESSAY, GREEDY))
    assert short and longer.startswith(short) and len(short) < len(longer)
    stop = longer.split()[3]
    stopped = await events_of(model, ESSAY, ModelSettings(temperature=0, max_tokens=16, stop=(stop,)))
    assert text_of(stopped) == longer[: longer.index(stop)]


@needs_the_model
async def test_a_reader_that_stops_stops_the_generation_at_its_next_token():
    model = LocalChatModel()
    replies = model.stream(ESSAY, (), ModelSettings(temperature=0, max_tokens=1500))
    pieces = 0
    async for event in replies:
        pieces += isinstance(event, TextDelta)
        if pieces == 3:
            break
    await replies.aclose()  # as a cancelled run closes it
    assert wait_until(lambda: not generating(), timeout=30)
    # How far the model went, from llama.cpp itself: the tokens in its context, prompt included.
    llama = local_model._models[model.path]._llama
    assert llama is not None and llama.n_tokens < 200
    # The model is free for the next reply.
    assert text_of(await events_of(model, QUESTION, GREEDY))


@needs_the_model
async def test_a_reply_cancelled_while_it_waits_its_turn_leaves_at_once():
    model = LocalChatModel()
    long = ModelSettings(temperature=0, max_tokens=1500)
    answering = model.stream(ESSAY, (), long)
    await anext(answering)  # the model is busy with this one
    waiting = asyncio.create_task(events_of(model, QUESTION, GREEDY))
    assert await asyncio.to_thread(wait_until, lambda: len(generating()) == 2, 10)
    waiting.cancel()  # as the run of a client that left
    assert await asyncio.to_thread(wait_until, lambda: len(generating()) == 1, 10)
    await answering.aclose()
    assert await asyncio.to_thread(wait_until, lambda: not generating(), 30)


@needs_the_model
async def test_one_model_is_loaded_per_process_and_shared_by_replies_that_take_turns():
    first, second = LocalChatModel(), LocalChatModel(default_gguf_path())
    together = await asyncio.gather(events_of(first, QUESTION, GREEDY), events_of(second, ESSAY, GREEDY))
    assert all(text_of(events).strip() for events in together)
    assert len(local_model._models) == 1 and first.path == second.path


@needs_the_model
async def test_tools_and_a_conversation_longer_than_the_context_are_clear_errors():
    model = LocalChatModel()
    with pytest.raises(ModelProviderError, match="calls no tools") as caught:
        spec = ToolSpec(name="t", description="d", parameters={"type": "object", "properties": {}})
        async for _ in model.stream(QUESTION, (spec,), GREEDY):
            pass
    assert caught.value.error_code == 400
    too_long = [ChatMessage("user", "bread " * 5000)]
    with pytest.raises(ModelProviderError, match="context") as caught:
        await events_of(model, too_long, GREEDY)
    assert caught.value.error_code == 400


def test_without_the_extra_the_error_names_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # as if llama-cpp-python were not installed
    with pytest.raises(SettingsError, match=r"sentient-assist\[local\]") as caught:
        LocalChatModel.from_settings(Settings(MODEL_NAME="local"))
    assert "MODEL_NAME=local" in str(caught.value)


@needs_the_model
def test_a_gguf_path_that_is_not_a_file_is_an_error_naming_the_setting(tmp_path):
    with pytest.raises(SettingsError, match="MODEL_GGUF_PATH"):
        LocalChatModel.from_settings(Settings(MODEL_NAME="local", MODEL_GGUF_PATH=str(tmp_path / "none.gguf")))


@needs_the_model
def test_the_chat_agent_answers_with_model_name_local_and_no_base_url():
    env = {"MODEL_NAME": "local", "MODEL_BASE_URL": "", "MODEL_TEMPERATURE": "0", "MODEL_MAX_TOKENS": "16"}
    with running_server(env, args=["--agent", "chat"]) as server:
        stream = read_stream(server.url, new_body("What is the capital of France?"), timeout=60)
    assert_well_ended(stream)
    assert_streams_completed(stream)
    assert [e for e in stream.events if e["event_name"] == "error"] == []
    answer = "".join(e["content"] for e in stream.events if e["event_name"] == "FINAL_RESPONSE")
    assert answer.strip() and stream.names()[-2:] == ["USAGE", "done"]
