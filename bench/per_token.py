"""Our own per-token path, in one process: a model's delta -> the agent -> a text stream -> its SSE frame -> the writer.

    python -m bench.per_token                 # 20,000 tokens a run, median of 7 runs
    python -m bench.per_token --tokens 5000 --repeats 3

No HTTP on either side, so the figures are our code's alone: the model is an in-memory
ChatModel yielding one-word TextDeltas, each after a turn of the event loop (a real model's
tokens arrive one per read, milliseconds apart, so each is its own frame and its own write);
the reader is EventStream's loop (take_ready / ready, one write per batch) with a send that
keeps nothing. Each row is one agent's CPU per token (time.process_time around the run / the
tokens), on uvloop as the service runs:

    frames     the floor: a text stream's emit_chunk per token, the agent making the text itself
    relay      a plain relay agent: `async for event in model.stream(...)`, emit_chunk per delta
    LLMAgent   sentient_assist/agents/chat.py's agent class (system prompt, history, usage, turns) on the same model
    LLMAgent /v1   the same agent, its events written as the OpenAI face's chunks (AnswerHook +
               ChunkWriter, `"stream": true`) instead of /assist's SSE frames

What LLMAgent adds over a plain relay is the third row minus the second. bench/relay.py
measures the whole server under load (HTTP both ways); bench/llm_stream_micro.py the model's
HTTP reading alone.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import uvloop
from ulid import ULID

from sentient_assist import AbstractAgent, LLMAgent, Query, ResponseHandler, Session
from sentient_assist.llm.messages import ChatMessage, ModelEvent, TextDelta, ToolSpec
from sentient_assist.llm.model import ModelSettings
from sentient_assist.protocol.conventions import TokenUsage
from sentient_assist.protocol.request import SessionObject
from sentient_assist.runtime.run import Run, RunStats
from sentient_assist.runtime.watcher import RunWatcher
from sentient_assist.server.event_stream import SseHook
from sentient_assist.server.openai.answer import AnswerHook, ChunkWriter


class DeltaModel:
    """A ChatModel that answers with `tokens` one-word deltas, one per turn of the loop, then usage."""

    name = "deltas"

    def __init__(self, tokens: int) -> None:
        self.tokens = tokens

    async def stream(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec], settings: ModelSettings
    ) -> AsyncIterator[ModelEvent]:
        for _ in range(self.tokens):
            await asyncio.sleep(0)
            yield TextDelta(" word")
        yield TokenUsage(input_tokens=10, output_tokens=self.tokens, total_tokens=10 + self.tokens)


class FramesAgent(AbstractAgent):
    """No model: the text stream alone, the floor of the path."""

    def __init__(self, tokens: int) -> None:
        super().__init__("frames")
        self.tokens = tokens

    async def assist(self, session: Session, query: Query, response_handler: ResponseHandler) -> None:
        stream = response_handler.create_text_stream("FINAL_RESPONSE")
        for _ in range(self.tokens):
            await asyncio.sleep(0)
            await stream.emit_chunk(" word")
        await stream.complete()
        await response_handler.complete()


class RelayAgent(AbstractAgent):
    """A plain relay: the model's text deltas to one text stream, nothing else."""

    def __init__(self, model: DeltaModel) -> None:
        super().__init__("relay")
        self.model = model

    async def assist(self, session: Session, query: Query, response_handler: ResponseHandler) -> None:
        stream = response_handler.create_text_stream("FINAL_RESPONSE")
        messages = [ChatMessage("user", query.prompt)]
        async for event in self.model.stream(messages, (), ModelSettings()):
            if isinstance(event, TextDelta):
                await stream.emit_chunk(event.text)
        await stream.complete()
        await response_handler.complete()


def llm_agent(tokens: int) -> LLMAgent:
    return LLMAgent(name="chat", model=DeltaModel(tokens), system_prompt="You are a helpful assistant.")


AGENTS: dict[str, Callable[[int], AbstractAgent]] = {
    "frames": FramesAgent,
    "relay": lambda tokens: RelayAgent(DeltaModel(tokens)),
    "LLMAgent": llm_agent,
    "LLMAgent /v1": llm_agent,
}
# How each row's events become bytes: /assist's frames, or the OpenAI face's chunks.
HOOKS: dict[str, Callable[..., Any]] = {
    "LLMAgent /v1": lambda channel, stats: AnswerHook(
        channel, stats, reader=ChunkWriter("chatcmpl-bench", 0, "chat", include_usage=True)
    ),
}


async def one_run(agent: AbstractAgent, make_hook: Callable[..., Any] = SseHook) -> tuple[float, int]:
    """CPU seconds of one run, read as EventStream reads it, and the frames written."""
    session = Session(SessionObject(processor_id=agent.name, activity_id=ULID(), request_id=ULID()))
    query = Query(id=ULID(), prompt="Count.")
    watcher = RunWatcher(time_limit=600)
    written = 0
    start = time.process_time()
    run = Run(agent, session, query, watcher=watcher, stats=RunStats("bench"), make_hook=make_hook)
    while True:
        batch = run.take_ready()
        if batch is None:
            await run.ready()
            continue
        if not batch:
            break
        body = batch[0] if len(batch) == 1 else b"".join(batch)
        written += len(body) > 0
    run.reader_left()
    spent = time.process_time() - start
    await asyncio.sleep(0)  # the agent's task ends
    return spent, written


def measure(tokens: int, repeats: int) -> dict[str, list[float]]:
    async def all_runs() -> dict[str, list[float]]:
        figures: dict[str, list[float]] = {name: [] for name in AGENTS}
        for repeat in range(repeats + 1):  # the first round warms up
            for name, make in AGENTS.items():
                spent, writes = await one_run(make(tokens), HOOKS.get(name, SseHook))
                if writes < tokens:
                    raise RuntimeError(f"{name}: {writes} writes for {tokens} tokens: tokens were batched")
                if repeat:
                    figures[name].append(spent / tokens * 1e6)
        return figures

    return uvloop.run(all_runs())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args(argv)
    figures = measure(args.tokens, args.repeats)
    floor = statistics.median(figures["frames"])
    relay = statistics.median(figures["relay"])
    print(f"{args.tokens} tokens a run, one frame and one write each; median of {args.repeats} runs (min)")
    print(f"| {'agent':<12} | {'us/token':>9} | {'over frames':>11} | {'over relay':>10} |")
    print(f"|{'-' * 14}|{'-' * 10}:|{'-' * 12}:|{'-' * 11}:|")
    for name, values in figures.items():
        median = statistics.median(values)
        over_relay = f"{median - relay:+.2f}" if name.startswith("LLMAgent") else ""
        print(f"| {name:<12} | {median:5.2f} ({min(values):.2f}) | {median - floor:+11.2f} | {over_relay:>10} |")


if __name__ == "__main__":
    main()
