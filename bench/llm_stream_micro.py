"""CPU per model token spent by OpenAIChatModel.stream, in this process, reading a real HTTP stream.

    python -m bench.llm_stream_micro                      # this tree's model, orjson and json
    python -m bench.llm_stream_micro --old /tmp/old.py    # and another openai_model.py beside it

The fake OpenAI server of tests/support streams `--tokens` one-word deltas from another process;
the figure is time.process_time() of this process around the loop that reads the events, divided
by the tokens read: the median of `--repeats` runs, on uvloop as the service runs. A model sends
a token every few milliseconds, each read on its own: `--delay 0.001` measures that case; with
no delay many events arrive in one read.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import subprocess
import sys
import time
import types
from collections.abc import Callable
from typing import Any

import uvloop

from sentient_assist.llm.messages import ChatMessage, TextDelta
from sentient_assist.llm.model import ModelSettings

_SERVER = """
import sys, time
from tests.support.openai_server import FakeOpenAI, stream_reply
server = FakeOpenAI().start()
server.enqueue(*[stream_reply(text=" w" * int(sys.argv[1]), delay=float(sys.argv[3])) for _ in range(int(sys.argv[2]))])
print(server.base_url, flush=True)
sys.stdin.read()
"""


def load_model_class(path: str) -> Any:
    spec = importlib.util.spec_from_file_location("old_openai_model", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module.OpenAIChatModel


def with_stdlib_json() -> None:
    """This tree's model with json instead of orjson, to measure what orjson buys."""
    from sentient_assist.llm import openai_model

    openai_model.orjson = types.SimpleNamespace(  # type: ignore[assignment]
        loads=json.loads, dumps=lambda value: json.dumps(value).encode(), JSONDecodeError=json.JSONDecodeError
    )


async def cpu_per_token(model: Any) -> float:
    messages = [ChatMessage(role="user", content="Count.")]
    tokens = 0
    start = time.process_time()
    async for event in model.stream(messages, (), ModelSettings()):
        tokens += isinstance(event, TextDelta)
    spent = time.process_time() - start
    return spent / tokens


def measure(name: str, make: Callable[[], Any], repeats: int, prepare: Callable[[], None] | None = None) -> None:
    if prepare is not None:
        prepare()

    async def runs() -> list[float]:
        model = make()
        return [await cpu_per_token(model) for _ in range(repeats + 1)][1:]  # the first warms up

    figures = uvloop.run(runs())
    print(f"{name:<28} {statistics.median(figures) * 1e6:8.1f} us/token  (min {min(figures) * 1e6:.1f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--delay", type=float, default=0.0, help="seconds between events (0: as fast as sent)")
    parser.add_argument("--old", help="another openai_model.py to measure beside this tree's")
    args = parser.parse_args()
    variants = 3 if args.old else 2
    server = subprocess.Popen(
        [sys.executable, "-c", _SERVER, str(args.tokens), str(variants * (args.repeats + 1)), str(args.delay)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        base_url = server.stdout.readline().strip()
        from sentient_assist.llm.openai_model import OpenAIChatModel

        pace = f"{args.delay * 1e3:g} ms apart" if args.delay else "as fast as sent"
        print(f"{args.tokens} tokens {pace}, median of {args.repeats} runs, CPU of the reading process")
        if args.old:
            old = load_model_class(args.old)
            measure("before (--old)", lambda: old("gpt-test", base_url=base_url, max_retries=0), args.repeats)
        measure("aiohttp + orjson", lambda: OpenAIChatModel("gpt-test", base_url=base_url), args.repeats)
        measure(
            "aiohttp + json",
            lambda: OpenAIChatModel("gpt-test", base_url=base_url),
            args.repeats,
            prepare=with_stdlib_json,
        )
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()
