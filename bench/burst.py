"""What a burst costs its first request: the time from a client's send to its model request
being answered, through the chat agent, for one client and for N at once, direct and through
/assist and /v1; with `--baseline REV`, through another build of the service too, in the same run.

    python -m bench.burst                          # about 40 s
    python -m bench.burst --baseline HEAD~1        # this tree against the commit before
    python -m bench.burst --gap 0.02               # each request after 20 ms idle, as between a real model's answers

The model server is bench/relay_upstream.py (`relay:3:0`: three tokens, the first at once):
each token's text is `@<its send time>|`, so the first one tells when the model server
answered, on this machine's clock. `lead` is that time less the client's send time: what the
request took to reach the model server and be answered, the service's part of a time to first
token before the model's own. `ttft` is the client's time to that first token. At N clients,
each round sends N requests at once through one path, and the figure is the round's least
(its first served), what a burst adds to the request at its head.

The baseline is REV checked out in a temporary git worktree and served from there, with the
same interpreter and packages (PYTHONPATH first), on its own port; the paths take turns.
`--baseline` may be given more than once: each REV is one more build in the turns.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import orjson

from bench.report import percentile
from bench.servers import HOST, ROOT, free_port, worktree

STAMP = re.compile(rb"@(\d+\.\d+)\|")
PROMPT = "relay:3:0"
QUERY_ID = "01JDQ4Z8M7T3V5X9A2B4C6D8EF"


def request_of(path: str, urls: dict[str, str]) -> tuple[str, bytes]:
    face, _, build = path.partition("@")
    if face == "direct":
        body = {"model": "relay", "messages": [{"role": "user", "content": PROMPT}], "stream": True}
        return urls["upstream"] + "/v1/chat/completions", orjson.dumps(body)
    base = urls[build or "ours"]
    if face == "assist":
        return base + "/assist", orjson.dumps({"query": {"id": QUERY_ID, "prompt": PROMPT}})
    body = {"model": "chat", "messages": [{"role": "user", "content": PROMPT}], "stream": True}
    return base + "/v1/chat/completions", orjson.dumps(body)


async def read_one(session: aiohttp.ClientSession, path: str, urls: dict[str, str]) -> tuple[float, float]:
    """(lead, ttft) of one request, in ms."""
    url, body = request_of(path, urls)
    sent_at, sent = time.time(), time.perf_counter()
    async with session.post(url, data=body, headers={"Content-Type": "application/json"}) as response:
        if response.status != 200:
            raise RuntimeError(f"{path}: HTTP {response.status}: {(await response.text())[:300]}")
        async for line in response.content:
            found = STAMP.search(line)
            if found:
                first = time.perf_counter()
                async for _ in response.content:
                    pass
                return (float(found.group(1)) - sent_at) * 1000, (first - sent) * 1000
    raise RuntimeError(f"{path}: no token")


async def measure(
    paths: list[str], urls: dict[str, str], rounds: int, burst: int, gap: float = 0.0
) -> dict[str, dict[int, list]]:
    readings: dict[str, dict[int, list]] = {path: {1: [], burst: []} for path in paths}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        for path in paths:  # warm up: connections, caches, the first requests' imports
            for _ in range(20):
                await read_one(session, path, urls)
            await asyncio.gather(*(read_one(session, path, urls) for _ in range(burst)))
        for number in range(rounds):
            order = paths[number % len(paths) :] + paths[: number % len(paths)]
            for path in order:
                if gap:
                    await asyncio.sleep(gap)
                readings[path][1].append(await read_one(session, path, urls))
            for path in order:
                if gap:
                    await asyncio.sleep(gap)
                together = await asyncio.gather(*(read_one(session, path, urls) for _ in range(burst)))
                readings[path][burst].append(min(together))
    return readings


def start(command: list[str], cwd: Path, env: dict[str, str], log: Path) -> subprocess.Popen:
    environment = {**os.environ, **env}
    output = log.open("w")
    return subprocess.Popen(
        command, cwd=cwd, env=environment, stdout=output, stderr=subprocess.STDOUT, start_new_session=True
    )


async def wait_serving(url: str, process: subprocess.Popen) -> None:
    async with aiohttp.ClientSession() as session:
        for _ in range(300):
            if process.poll() is not None:
                raise RuntimeError(f"{url}: the server exited (its log is in the run's folder)")
            try:
                async with session.get(url) as response:
                    if response.status < 500:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.1)
    raise RuntimeError(f"{url}: not serving")


async def serve_and_measure(
    servers: list[tuple[str, subprocess.Popen]], paths: list[str], urls: dict[str, str], args: argparse.Namespace
) -> dict[str, dict[int, list]]:
    for url, process in servers:
        await wait_serving(url, process)
    return await measure(paths, urls, args.rounds, args.clients, args.gap)


def run(args: argparse.Namespace) -> str:
    workdir = Path(tempfile.mkdtemp(prefix="bench-burst-"))
    servers: list[tuple[str, subprocess.Popen]] = []
    stack = contextlib.ExitStack()
    try:
        ports = {"upstream": free_port(), "ours": free_port()}
        urls = {name: f"http://{HOST}:{port}" for name, port in ports.items()}
        upstream = [sys.executable, "-m", "bench.relay_upstream", "--port", str(ports["upstream"])]
        servers.append((urls["upstream"] + "/", start(upstream, ROOT, {}, workdir / "upstream.log")))
        model = {"MODEL_BASE_URL": f"http://{HOST}:{ports['upstream']}/v1", "MODEL_NAME": "relay"}
        model |= {"MODEL_API_KEY": "unused", "ASSIST_LOG_LEVEL": "warning"}
        builds: dict[str, tuple[Path, dict[str, str]]] = {"ours": (ROOT, {})}
        for number, rev in enumerate(args.baseline):
            baseline_tree = stack.enter_context(worktree(rev, workdir / f"baseline{number}"))
            ports[rev] = free_port()
            urls[rev] = f"http://{HOST}:{ports[rev]}"
            builds[rev] = (baseline_tree, {"PYTHONPATH": str(baseline_tree)})
        for number, (build, (tree, env)) in enumerate(builds.items()):
            command = [sys.executable, "-m", "app", "serve", "--agent", "chat", "--host", HOST]
            log = workdir / f"build{number}.log"
            process = start([*command, "--port", str(ports[build])], tree, model | env, log)
            servers.append((urls[build] + "/healthz", process))
        faces = args.only.split(",") if args.only else ["assist", "v1"]
        paths = ["direct", *faces] + [f"{face}@{rev}" for rev in args.baseline for face in faces]
        started = time.monotonic()
        readings = asyncio.run(serve_and_measure(servers, paths, urls, args))
        seconds = time.monotonic() - started
    finally:
        for _, process in servers:
            if process.poll() is None:
                os.killpg(process.pid, 15)
                process.wait(10)
        stack.close()  # the baseline's worktree, once its server has stopped
        shutil.rmtree(workdir, ignore_errors=True)
    label = {f"{face}@{rev}": f"/{face} at {rev}" for rev in args.baseline for face in ("assist", "v1")}
    lines = [
        "| clients | path | lead p50, ms | lead p99, ms | ttft p50, ms | ttft p99, ms |",
        "|---:|---|---:|---:|---:|---:|",
    ]
    for clients in (1, args.clients):
        for path in paths:
            leads = [lead for lead, _ in readings[path][clients]]
            ttfts = [ttft for _, ttft in readings[path][clients]]
            name = label.get(path, "direct" if path == "direct" else f"/{path}")
            shown = f"{clients}, first served" if clients > 1 else "1"
            lines.append(
                f"| {shown} | {name} | {statistics.median(leads):.2f} | {percentile(leads, 0.99):.2f} | "
                f"{statistics.median(ttfts):.2f} | {percentile(ttfts, 0.99):.2f} |"
            )
    gap = f", {args.gap * 1000:.0f} ms idle before each request" if args.gap else ""
    lines.append(f"\n{args.rounds} rounds{gap}, {seconds:.0f} s, load average {os.getloadavg()[0]:.2f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.burst", description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=200, help="rounds of each load (default 200)")
    parser.add_argument("--only", help="faces, comma-separated: assist, v1 (default both)")
    parser.add_argument("--clients", type=int, default=4, help="requests sent at once in a burst (default 4)")
    parser.add_argument(
        "--baseline",
        action="append",
        default=[],
        help="a git revision to serve beside this tree, from a temporary worktree (may be repeated)",
    )
    parser.add_argument(
        "--gap",
        type=float,
        default=0.0,
        help="seconds of idle before each request (default 0: back to back); a real model's answers leave"
        " the service idle between requests, and after idle each request's work, its writes most, costs"
        " about three times as much (bench/README.md)",
    )
    args = parser.parse_args(argv)
    print(run(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
