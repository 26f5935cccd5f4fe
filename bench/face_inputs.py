"""What the inputs of the AG-UI and MCP faces cost the service beyond the conversation: CPU
per 1 MB hostile body, and memory per open stream (issue 40, parts 1 and 2).

    python -m bench.face_inputs                  # about two minutes on 2 cores
    python -m bench.face_inputs --quick          # fewer requests and streams: a smoke run
    python -m bench.face_inputs --baseline HEAD~3 --loads cpu --shapes agui-state-objects

One `python -m app serve` (uvloop, httptools) serving bench/agent.py with every face, on
loopback, and with `--baseline REV` REV beside it (a temporary git worktree, the same
interpreter). Each body is as large as the default ASSIST_MAX_BODY_BYTES (1 MiB) takes, the
bulk in one input (`SHAPES`): `[{},{},...]` (objects), `[[[...]]]` 500 deep again and again
(deep), `["","",...]` (strings), and the faces' own lists of tiny items (context items,
tools, MCP history turns).

    cpu      10 sequential `wait:0` requests with the body (after 2 to warm up): the server's
             CPU time (schedstat, every thread) per request, less that of the face's plain
             request; and the status the body got (a refused one costs what its refusal does)
    memory   N `hold:30` streams with the body, all open (their first event received: the
             input was taken, the agent waits): (RSS - RSS before) / N, each shape on a
             freshly started server

It prints a Markdown table; nothing here runs in CI.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

from bench.servers import HOST, Server, beside_baseline

MAX_BODY = 1_048_576
ROOM = MAX_BODY - 2048  # what the bulk of a body may take
MCP_HEADERS = "Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2025-06-18\r\n"


def _dumps(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def _repeat(item: object, room: int = ROOM) -> list[object]:
    return [item] * (room // (len(_dumps(item)) + 1))


def _deep(room: int = ROOM, depth: int = 500) -> list[object]:
    nested: object = []
    for _ in range(depth - 1):
        nested = [nested]
    return _repeat(nested, room)


BULK: dict[str, Callable[[], object]] = {
    "objects": lambda: _repeat({}),
    "deep": _deep,
    "strings": lambda: _repeat(""),
}


def agui(prompt: str, **fields: object) -> bytes:
    message = {"id": "u1", "role": "user", "content": prompt}
    return _dumps({"threadId": "t1", "runId": "r1", "messages": [message], **fields})


def mcp(prompt: str, arguments: dict[str, object] | None = None, **params: object) -> bytes:
    call = {"name": "bench", "arguments": {"prompt": prompt, **(arguments or {})}, **params}
    call.setdefault("_meta", {"progressToken": 1})  # the agent's first event comes as a progress note
    return _dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call})


# name: (path, the body for a prompt)
SHAPES: dict[str, tuple[str, Callable[[str], bytes]]] = {
    "agui-plain": ("/agui", lambda prompt: agui(prompt)),
    **{f"agui-state-{name}": ("/agui", lambda p, b=bulk: agui(p, state=b())) for name, bulk in BULK.items()},
    **{
        f"agui-forwarded-{name}": ("/agui", lambda p, b=bulk: agui(p, forwardedProps=b()))
        for name, bulk in BULK.items()
    },
    "agui-context-items": ("/agui", lambda p: agui(p, context=_repeat({"description": "", "value": ""}))),
    "agui-context-extra": ("/agui", lambda p: agui(p, context=[{"description": "d", "value": "v", "x": _repeat({})}])),
    "agui-tools-many": ("/agui", lambda p: agui(p, tools=_repeat({"name": "t", "description": ""}))),
    "agui-tool-parameters": (
        "/agui",
        lambda p: agui(p, tools=[{"name": "t", "description": "", "parameters": {"a": _repeat({})}}]),
    ),
    "agui-tool-extra": ("/agui", lambda p: agui(p, tools=[{"name": "t", "description": "", "x": _repeat({})}])),
    "agui-extra-field": ("/agui", lambda p: agui(p, junk=_repeat({}))),
    "agui-messages-many": (
        "/agui",
        lambda p: agui(
            p,
            messages=[*_repeat({"id": "", "role": "system", "content": ""}), {"id": "u", "role": "user", "content": p}],
        ),
    ),
    "mcp-plain": ("/mcp", lambda prompt: mcp(prompt)),
    **{f"mcp-argument-{name}": ("/mcp", lambda p, b=bulk: mcp(p, {"extra": b()})) for name, bulk in BULK.items()},
    "mcp-history": (
        "/mcp",
        lambda p: mcp(
            p,
            {
                "history": _repeat(
                    {"prompt": "q" * 80, "answer": "a"},
                )[:10_000]
            },
        ),
    ),
    "mcp-history-extra": ("/mcp", lambda p: mcp(p, {"history": [{"prompt": "q", "x": _repeat({})}]})),
    "mcp-params-extra": ("/mcp", lambda p: mcp(p, junk=_repeat({}))),
    "mcp-meta-extra": ("/mcp", lambda p: mcp(p, _meta={"progressToken": 1, "junk": _repeat({})})),
}


async def exchange(server: Server, path: str, body: bytes, *, hold: bool = False) -> tuple[int, asyncio.StreamWriter]:
    """POST `body`; the status, once the answer has ended (or, with `hold`, once its first
    event has come), and the connection (open with `hold`)."""
    reader, writer = await asyncio.open_connection(HOST, server.port, limit=1 << 20)
    extra = MCP_HEADERS if path == "/mcp" else "Accept: text/event-stream\r\n"
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {HOST}\r\nContent-Type: application/json\r\n{extra}"
        f"Connection: close\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    writer.write(head.encode() + body)
    received = b""
    async with asyncio.timeout(60):
        while b"\r\n\r\n" not in received:
            chunk = await reader.read(1 << 16)
            if not chunk:
                raise ConnectionError(f"closed before the headers: {received[:200]!r}")
            received += chunk
        status = int(received.split(b" ", 2)[1])
        if hold and status == 200:
            while b"data:" not in received.partition(b"\r\n\r\n")[2]:
                chunk = await reader.read(1 << 16)
                if not chunk:
                    raise ConnectionError("closed before the first event")
                received += chunk
        elif not hold:
            while await reader.read(1 << 16):
                pass
    if not hold:
        writer.close()
    return status, writer


async def cpu_per_request(server: Server, shape: str, requests: int) -> dict:
    path, body_of = SHAPES[shape]
    plain_of = SHAPES["agui-plain" if path == "/agui" else "mcp-plain"][1]

    async def measure(make: Callable[[str], bytes]) -> tuple[float, set[int]]:
        bodies = [make("wait:0") for _ in range(requests)]
        statuses = set()
        before = server.cpu_seconds()
        for body in bodies:
            statuses.add((await exchange(server, path, body))[0])
        return (server.cpu_seconds() - before) * 1000 / requests, statuses

    for _ in range(2):
        await exchange(server, path, body_of("wait:0"))
    plain, _ = await measure(plain_of)
    heavy, statuses = await measure(body_of)
    return {"ms_for_the_body": heavy - plain, "plain_ms": plain, "statuses": sorted(statuses)}


async def memory_per_stream(server: Server, shape: str, streams: int) -> dict:
    path, body_of = SHAPES[shape]
    for _ in range(2):
        await exchange(server, path, body_of("wait:0"))
    bodies = [body_of("hold:30") for _ in range(streams)]
    await asyncio.sleep(0.5)
    before = server.rss_kb()
    writers = []
    statuses = set()
    try:
        for body in bodies:  # one at a time: each body is taken before the next is sent
            status, writer = await exchange(server, path, body, hold=True)
            statuses.add(status)
            writers.append(writer)
        await asyncio.sleep(0.5)
        during = server.rss_kb()
    finally:
        for writer in writers:
            writer.close()
    return {"mb_per_stream": (during - before) / 1024 / streams, "streams": streams, "statuses": sorted(statuses)}


async def measure(server: Server, args: argparse.Namespace) -> dict:
    results: dict = {}
    for shape in args.shapes:
        if shape.endswith("-plain"):
            continue
        if "cpu" in args.loads:
            print(f"{server.label}: cpu: {shape}", file=sys.stderr)
            results[f"cpu {shape}"] = await cpu_per_request(server, shape, 3 if args.quick else 10)
        if "memory" in args.loads:
            print(f"{server.label}: memory: {shape}", file=sys.stderr)
            # A fresh process: the heap an earlier shape grew would hide what this one holds.
            server.restart()
            await server.wait_ready()
            results[f"memory {shape}"] = await memory_per_stream(server, shape, 5 if args.quick else args.streams)
    return results


async def main_async(args: argparse.Namespace) -> dict:
    env = {
        "ASSIST_AGENT": "bench.agent:BenchAgent",
        "ASSIST_LOG_LEVEL": "warning",
        "ASSIST_FACES": "assist,agui,mcp",
        "ASSIST_MAX_HISTORY_BYTES_TOTAL": str(1 << 30),  # the streams' memory, not the budget, is measured
    }
    return await beside_baseline(
        env, args.baseline, args.repeats, lambda server: measure(server, args), prefix="bench-face-inputs-"
    )


def cell(load: str, runs: list[dict]) -> str:
    statuses = ",".join(str(status) for status in sorted({s for run in runs for s in run["statuses"]}))
    if load.startswith("cpu"):
        ms = statistics.median(run["ms_for_the_body"] for run in runs)
        return f"{ms:.0f} ms ({statuses})"
    mb = statistics.median(run["mb_per_stream"] for run in runs)
    return f"{mb:.2f} MB ({statuses})"


def table(builds: dict) -> str:
    labels = list(builds)
    lines = ["| load | " + " | ".join(labels) + " |", "|---|" + "---:|" * len(labels)]
    for load in dict.fromkeys(load for runs in builds.values() for load in runs):
        cells = [cell(load, builds[label][load]) if load in builds[label] else "" for label in labels]
        lines.append(f"| {load} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer requests and streams: a smoke run")
    parser.add_argument("--streams", type=int, default=20, help="open streams of the memory load (default 20)")
    parser.add_argument("--repeats", type=int, default=1, help="repeats of each load (default 1)")
    parser.add_argument("--baseline", metavar="REV", help="a git revision to serve and measure beside this tree")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument(
        "--loads", type=lambda text: set(text.split(",")), default={"cpu", "memory"}, help="cpu, memory (default both)"
    )
    parser.add_argument(
        "--shapes", type=lambda text: text.split(","), default=list(SHAPES), help="which bodies, comma-separated"
    )
    args = parser.parse_args(argv)
    builds = asyncio.run(main_async(args))
    print(table(builds))
    if args.json:
        args.json.write_text(json.dumps(builds, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
