"""What a long history costs the service: memory per open stream, CPU per request, and what
clients looping history bombs do to everybody else's first event (issue 23, items 3 and 4).

    python -m bench.history              # about a minute on 2 cores
    python -m bench.history --quick      # fewer requests: a smoke run
    python -m bench.history --loads cpu,bombs --repeats 3 --baseline HEAD~1   # against the commit before

One `python -m app serve` (uvloop, httptools), serving bench/agent.py, on loopback. The
bodies are as large as the default ASSIST_MAX_BODY_BYTES (1 MiB) takes:

    turns       8,500 past turns of one short question each: the issue's "1 MB body of 8,500 interactions"
    chat        ~2,800 past turns, each answered by a text chunk, its closing chunk and done
    responses   one past turn answered by ~18,000 `done` events (no ids: the service makes them)
    padded      no history: 1 MB of padding no model reads (what reading 1 MB costs, whatever it holds)
    v1          20,001 /v1/chat/completions messages (~650 KB)

The loads:

    cpu         20 sequential `wait:0` requests with the body (after 3 to warm up): the server
                process's CPU time (schedstat, every thread) per request, less a plain request's
    memory      N concurrent `wait:30` streams with the body, all open (headers received; the
                agent sleeps and never reads the history): (RSS - RSS before) / N, after two
                bombs to warm the allocator up
    bombs       4 clients each looping `wait:0` requests with the 1 MB `turns` body while a
                probe sends a plain `wait:0` every 50 ms: the probe's time to its first event
                (median, p90, max), against the same probe on an idle server

With `--baseline REV`, REV is served as well, from a temporary git worktree (bench/servers.py,
`worktree`: the same interpreter and packages), the two servers taking turns at each load of each
repeat (`--repeats N`, the order rotated every repeat); each figure is the median of the repeats,
its range in brackets.

It prints a Markdown table; `--json PATH` writes the figures too. Nothing here runs in CI.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

from bench import client
from bench.servers import HOST, Server, beside_baseline

MAX_BODY = 1_048_576
CHAT_ID = "01JDQ4Z8M7T3V5X9A2B4C6D8EF"
SOURCE = "bench"


def _dumps(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def _body(prompt: str, interactions: list[dict]) -> dict:
    return {
        "query": {"id": client.new_ulid(), "prompt": prompt},
        "session": {
            "processor_id": SOURCE,
            "activity_id": client.new_ulid(),
            "request_id": client.new_ulid(),
            "interactions": interactions,
        },
    }


def _turn(index: int, responses: list[dict] | None = None) -> dict:
    request = {"chatId": CHAT_ID, "content": {"request_payload": {"parts": [{"prompt": f"q{index:04}"}]}}}
    turn: dict = {"request": {"event": request}}
    if responses is not None:
        turn["responses"] = responses
    return turn


def _fill(prompt: str, make, limit: int = MAX_BODY - 512) -> bytes:
    """The body of as many interactions from `make(i)` as fit under `limit` bytes."""
    empty = len(_dumps(_body(prompt, [])))
    size = empty
    interactions: list[dict] = []
    while True:
        item = make(len(interactions))
        item_size = len(_dumps(item)) + 1
        if size + item_size > limit:
            break
        interactions.append(item)
        size += item_size
    return _dumps(_body(prompt, interactions))


def turns_body(prompt: str, count: int = 8_500) -> bytes:
    """`count` short past turns in about 1 MB (the prompts padded to fill it)."""
    room = (MAX_BODY - 1024 - len(_dumps(_body(prompt, [])))) // count - len(_dumps(_turn(0))) - 1
    if room < 0:
        raise ValueError(f"{count} turns do not fit in {MAX_BODY} bytes")
    pad = "x" * room
    interactions = []
    for index in range(count):
        turn = _turn(index)
        turn["request"]["event"]["content"]["request_payload"]["parts"][0]["prompt"] += pad
        interactions.append(turn)
    return _dumps(_body(prompt, interactions))


def chat_body(prompt: str) -> bytes:
    def make(index: int) -> dict:
        chunk = {"content_type": "chunked.text", "event_name": "FINAL_RESPONSE", "source": SOURCE}
        events = [
            {**chunk, "stream_id": "s1", "is_complete": False, "content": f"answer {index}"},
            {**chunk, "stream_id": "s1", "is_complete": True, "content": ""},
            {"content_type": "atomic.done", "event_name": "done", "source": SOURCE},
        ]
        return _turn(index, [{"event": event} for event in events])

    return _fill(prompt, make)


def responses_body(prompt: str) -> bytes:
    done = {"event": {"content_type": "atomic.done", "source": SOURCE}}
    empty = len(_dumps(_body(prompt, [_turn(0, [])])))
    count = (MAX_BODY - 512 - empty) // (len(_dumps(done)) + 1)
    return _dumps(_body(prompt, [_turn(0, [done] * count)]))


def v1_body(prompt: str, messages: int = 20_001) -> bytes:
    chat = []
    for index in range(messages - 1):
        chat.append({"role": "user" if index % 2 == 0 else "assistant", "content": str(index % 10)})
    chat.append({"role": "user", "content": prompt})
    return _dumps({"model": "bench", "stream": True, "messages": chat})


def padded_body(prompt: str) -> bytes:
    """No history, and 1 MB of spaces in a field no model reads: what reading and parsing a
    1 MB body costs, whatever it holds."""
    body = _body(prompt, [])
    body["padding"] = " " * (MAX_BODY - 1024 - len(_dumps(body)))
    return _dumps(body)


SHAPES = {"turns": turns_body, "chat": chat_body, "responses": responses_body, "padded": padded_body}


class HistoryStream(client.SseStream):
    """One request with a body given whole, to /assist or to /v1/chat/completions (whose
    chunks are counted as events: only the first one's time matters here)."""

    def __init__(self, port: int, prompt: str, body: bytes, path: str = "/assist") -> None:
        super().__init__(HOST, port, prompt)
        self._request = body
        self._path = path

    async def start(self) -> None:
        r = self.result
        self._reader, self._writer = await asyncio.open_connection(HOST, self.port, limit=client.READ_SIZE)
        head = (
            f"POST {self._path} HTTP/1.1\r\nHost: {HOST}:{self.port}\r\n"
            "Content-Type: application/json\r\nAccept: text/event-stream\r\n"
            f"Connection: close\r\nContent-Length: {len(self._request)}\r\n\r\n"
        ).encode()
        r.t_send = time.perf_counter()
        self._writer.write(head + self._request)
        while not self._headers_done:
            data = await self._reader.read(client.READ_SIZE)
            if not data:
                raise client.ProtocolError("connection closed before the response headers")
            self._parse(data)
        r.t_headers = time.perf_counter()
        r.status = self._parser.get_status_code()
        if r.status != 200:
            r.problems.append(f"status {r.status}")

    def _frames(self, part: bytes) -> None:
        if self._path == "/assist":
            super()._frames(part)
        elif self.result.t_first is None and b"data:" in part:
            self.result.t_first = time.perf_counter()

    def _check_counts(self) -> None:
        if self._path == "/assist":
            super()._check_counts()


async def one(port: int, prompt: str, body: bytes, path: str = "/assist", timeout: float = 60) -> client.StreamResult:
    stream = HistoryStream(port, prompt, body, path)
    try:
        async with asyncio.timeout(timeout):
            await stream.start()
            return await stream.finish()
    except (TimeoutError, OSError, client.ProtocolError) as exc:
        stream.result.problems.append(f"{type(exc).__name__}: {exc}")
    finally:
        stream.close()
    return stream.result


def _plain(prompt: str) -> bytes:
    return _dumps(_body(prompt, []))


async def cpu_per_request(server: Server, body_of, requests: int, path: str = "/assist") -> dict:
    """CPU milliseconds of the server per request with this body, and with a plain one."""
    for _ in range(3):
        await one(server.port, "wait:0", body_of("wait:0"), path)

    async def measure(make) -> float:
        bodies = [make("wait:0") for _ in range(requests)]
        before = server.cpu_seconds()
        for body in bodies:
            result = await one(server.port, "wait:0", body, path)
            if not result.ok:
                raise RuntimeError(f"a request failed: {result.problems}")
        return (server.cpu_seconds() - before) * 1000 / requests

    plain = await measure(_plain if path == "/assist" else lambda prompt: v1_body(prompt, 1))
    heavy = await measure(body_of)
    return {"ms_per_request": heavy, "plain_ms": plain, "ms_for_the_history": heavy - plain}


async def memory_per_stream(server: Server, body_of, streams: int, path: str = "/assist") -> dict:
    """RSS growth per open stream holding this history (its agent waits and never reads it)."""
    for _ in range(2):
        await one(server.port, "wait:0", body_of("wait:0"), path)
    await asyncio.sleep(0.5)
    bodies = [body_of("wait:30") for _ in range(streams)]
    before = server.rss_kb()
    opened = [HistoryStream(server.port, "wait:30", body, path) for body in bodies]
    refused = 0
    for stream in opened:  # one at a time: each body is parsed before the next is sent
        await stream.start()
        refused += stream.result.status != 200
    await asyncio.sleep(0.5)
    during = server.rss_kb()
    for stream in opened:
        stream.close()
    return {
        "streams": streams,
        "refused": refused,
        "rss_before_kb": before,
        "rss_open_kb": during,
        "mb_per_stream": (during - before) / 1024 / streams,
    }


def held_per_turn() -> dict:
    """What a history holds while its stream is open, counted in this process (the same code
    as the server's): the compact history's bytes, against the models of the same turns."""
    import gc
    import tracemalloc

    from pydantic import TypeAdapter

    from sentient_assist.protocol import history as histories
    from sentient_assist.protocol.request import Request

    compact = getattr(histories, "CompactRequest", None)  # None: a service from before it
    results = {}
    for name in ("turns", "chat", "responses"):
        document = json.loads(SHAPES[name]("wait:0"))
        turns = document["session"]["interactions"]
        history = None if compact is None else TypeAdapter(compact).validate_python(document).session.interactions
        gc.collect()
        tracemalloc.start()
        models = Request.model_validate(document)
        models_bytes = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        del models
        events = sum(len(turn.get("responses", ())) for turn in turns)
        results[name] = {
            "turns": len(turns),
            "events": events,
            "history_bytes": history.nbytes if history is not None else models_bytes,
            "models_bytes": models_bytes,
        }
    return results


async def first_event_under_bombs(server: Server, seconds: float, bombers: int = 4, shape: str = "turns") -> dict:
    """A plain request's time to its first event, while `bombers` clients loop 1 MB histories."""
    bomb = SHAPES[shape]("wait:0")
    stop = asyncio.Event()
    done = {"bombs": 0, "failed": 0}

    async def bomber() -> None:
        while not stop.is_set():
            result = await one(server.port, "wait:0", bomb)
            done["bombs" if result.ok else "failed"] += 1

    async def probe(until: float) -> list[float]:
        times = []
        while time.perf_counter() < until:
            result = await one(server.port, "wait:0", _plain("wait:0"))
            if result.ttfe is not None:
                times.append(result.ttfe * 1000)
            await asyncio.sleep(0.05)
        return times

    idle = await probe(time.perf_counter() + 2)
    tasks = [asyncio.create_task(bomber()) for _ in range(bombers)]
    await asyncio.sleep(0.5)
    busy = await probe(time.perf_counter() + seconds)
    stop.set()
    await asyncio.gather(*tasks)
    busy.sort()
    return {
        "idle_median_ms": statistics.median(idle),
        "median_ms": statistics.median(busy),
        "p90_ms": busy[int(len(busy) * 0.9)],
        "max_ms": busy[-1],
        "probes": len(busy),
        "bombs_answered": done["bombs"],
        "bombs_failed": done["failed"],
    }


async def measure_loads(server: Server, args: argparse.Namespace) -> dict:
    """One repeat of the loads `args` names, against one server: {load: figures}."""
    results: dict = {}
    requests = 5 if args.quick else 20
    for name, make in SHAPES.items() if "cpu" in args.loads else ():
        print(f"{server.label}: cpu: {name}", file=sys.stderr)
        results[f"cpu {name}"] = await cpu_per_request(server, make, requests)
    if "cpu" in args.loads:
        print(f"{server.label}: cpu: v1", file=sys.stderr)
        results["cpu v1"] = await cpu_per_request(server, v1_body, requests, "/v1/chat/completions")
    streams = 10 if args.quick else args.streams
    for name in ("turns", "responses") if "memory" in args.loads else ():
        print(f"{server.label}: memory: {name}", file=sys.stderr)
        results[f"memory {name}"] = await memory_per_stream(server, SHAPES[name], streams)
    if "memory" in args.loads:
        print(f"{server.label}: memory: v1", file=sys.stderr)
        results["memory v1"] = await memory_per_stream(server, v1_body, streams, "/v1/chat/completions")
    for shape in ("turns", "responses") if "bombs" in args.loads else ():
        print(f"{server.label}: first event under 4 clients bombing with {shape}", file=sys.stderr)
        results[f"bombs {shape}"] = await first_event_under_bombs(
            server, 3 if args.quick else args.seconds, shape=shape
        )
    return results


async def main_async(args: argparse.Namespace) -> dict:
    """{"builds": {label: {load: [figures of each repeat]}}, "held": ...}: this tree's server, and
    the baseline's beside it with `--baseline`."""
    env = {"ASSIST_AGENT": "bench.agent:BenchAgent", "ASSIST_LOG_LEVEL": "warning"}
    builds = await beside_baseline(
        env, args.baseline, args.repeats, lambda server: measure_loads(server, args), prefix="bench-history-"
    )
    results: dict = {"builds": builds}
    if "held" in args.loads:
        results["held"] = held_per_turn()
    return results


def _spread(runs: list[dict], figure: str, spec: str) -> str:
    """The median of `figure` over the repeats, and with more than one its range."""
    values = [run[figure] for run in runs]
    median = format(statistics.median(values), spec)
    return median if len(values) == 1 else f"{median} ({min(values):{spec}}-{max(values):{spec}})"


def cell(load: str, runs: list[dict]) -> str:
    if load.startswith("cpu"):
        return f"{_spread(runs, 'ms_per_request', '.1f')} ms per request (plain: {_spread(runs, 'plain_ms', '.1f')} ms)"
    if load.startswith("memory"):
        refused = sum(run["refused"] for run in runs)
        shown = f", {refused} refused" if refused else ""
        return f"{_spread(runs, 'mb_per_stream', '.2f')} MB per open stream ({runs[0]['streams']}{shown})"
    return (
        f"median {_spread(runs, 'median_ms', '.0f')} ms, p90 {_spread(runs, 'p90_ms', '.0f')} ms,"
        f" max {_spread(runs, 'max_ms', '.0f')} ms ({sum(run['probes'] for run in runs)} probes,"
        f" {sum(run['bombs_answered'] for run in runs)} bombs; idle: {_spread(runs, 'idle_median_ms', '.1f')} ms)"
    )


def table(results: dict) -> str:
    builds = results["builds"]
    labels = list(builds)
    lines = ["| load | " + " | ".join(labels) + " |", "|---|" + "---|" * len(labels)]
    for load in dict.fromkeys(load for runs in builds.values() for load in runs):
        load_name = load if not load.startswith("bombs") else f"first event, 4 clients looping {load.split()[1]}"
        cells = [cell(load, builds[label][load]) if load in builds[label] else "" for label in labels]
        lines.append(f"| {load_name} | " + " | ".join(cells) + " |")
    for name, held in results.get("held", {}).items():
        per_turn = held["history_bytes"] / held["turns"]
        models = held["models_bytes"] / held["turns"]
        lines.append(
            f"| held: {name} ({held['turns']} turns, {held['events']} events) | {held['history_bytes']:,} bytes"
            f" ({per_turn:,.0f} per turn); as models: {held['models_bytes']:,} ({models:,.0f} per turn) |"
            + " |"
            * (len(labels) - 1)
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer requests: a smoke run")
    parser.add_argument("--streams", type=int, default=30, help="open streams of the memory loads (default 30)")
    parser.add_argument("--seconds", type=float, default=10, help="seconds of the bombing load (default 10)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--repeats", type=int, default=1, help="repeats of each load (default 1)")
    parser.add_argument("--baseline", metavar="REV", help="a git revision to serve and measure beside this tree")
    parser.add_argument(
        "--loads",
        type=lambda text: set(text.split(",")),
        default={"cpu", "memory", "bombs", "held"},
        help="which loads, comma-separated: cpu, memory, bombs, held (default: all)",
    )
    args = parser.parse_args(argv)
    results = asyncio.run(main_async(args))
    print(table(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
