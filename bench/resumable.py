"""What resumable runs cost (ASSIST_DETACH_GRACE; docs/resumable.md), in one run:

    python -m bench.resumable                        # relay load, resume latency, Redis memory
    python -m bench.resumable --baseline /tmp/base   # also: bench/run.py's loads, this tree (off)
                                                     #   against the tree at /tmp/base (before)
    python -m bench.resumable --quick                # a smoke run

1. The relay load (bench/relay.py: a fake OpenAI upstream, our `chat` agent, 200 streams of 100
   tokens at 50 tokens/s), with the servers restarted and warmed up before each repeat, the
   repeats interleaved: `plain` (ASSIST_DETACH_GRACE unset), `memory` (ASSIST_DETACH_GRACE=30,
   no Redis), `redis` (ASSIST_DETACH_GRACE=30, ASSIST_REDIS_URL: a redis-server the bench
   starts, `--save '' --appendonly no`). Server CPU per token (its process group), added
   latency p50/p99 over every token, and for `redis` Redis's own CPU per token.
2. A resume's time to its first replayed event: a finished run of 100 tokens (`count`), GET
   /assist/runs/<handle> from its first event, 50 times in a row, on the replica that ran it
   (from its memory) and on another one (from Redis): the median and p90 from the request sent
   to the first whole frame.
3. Redis's memory for one run of 100 tokens once done: MEMORY USAGE of its stream and its hash.
4. With `--baseline DIR`: bench/run.py's loads (1 stream of 20,000 events, 50 streams of 1,000,
   first event of `stream:100`), this tree with resumable runs off against the tree in DIR
   (`python -m app serve` run from there), interleaved, medians: the plain path is unchanged.

Prints a table (Markdown with --markdown) and writes bench/resumable_results.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import client
from bench.relay import make_server as make_relay_server
from bench.relay import make_upstream, measure, wait_ready, warm_up
from bench.run import Problems, concurrent_streams, first_event, single_stream
from bench.servers import HOST, Server

BENCH_DIR = Path(__file__).resolve().parent
GRACE = "30"
COUNTING_AGENT = "tests.server.resumable_agents:CountingAgent"


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def start_redis(log_dir: Path) -> Server:
    redis = shutil.which("redis-server") or "/usr/bin/redis-server"
    command = [redis, "--bind", HOST, "--save", "", "--appendonly", "no", "--dir", str(log_dir)]
    server = Server("redis", "redis", command, {}, log_dir / "redis.log")
    server.start()
    return server


def redis_command(port: int, *args: str) -> str:
    out = subprocess.run(["redis-cli", "-p", str(port), *args], capture_output=True, text=True, timeout=10)
    return out.stdout.strip()


def redis_wait(port: int) -> None:
    deadline = time.monotonic() + 10
    while redis_command(port, "PING") != "PONG":
        if time.monotonic() > deadline:
            raise RuntimeError("redis-server does not answer")
        time.sleep(0.05)


def relay_servers(upstream_port: int, redis_port: int, log_dir: Path) -> list[Server]:
    servers = []
    for key, extra in (
        ("plain", {}),
        ("memory", {"ASSIST_DETACH_GRACE": GRACE}),
        ("redis", {"ASSIST_DETACH_GRACE": GRACE, "ASSIST_REDIS_URL": f"redis://{HOST}:{redis_port}/0"}),
    ):
        server = make_relay_server("chat", upstream_port, log_dir, None)
        server.key, server.label = key, key
        server.env = {**server.env, **extra}
        server.log_path = log_dir / f"{key}.log"
        servers.append(server)
    return servers


async def relay_part(args, log_dir: Path, redis: Server) -> dict:
    upstream = make_upstream(log_dir)
    upstream.start()
    servers = relay_servers(upstream.port, redis.port, log_dir)
    runs: dict[str, list[dict]] = {server.key: [] for server in servers}
    try:
        await asyncio.sleep(0.5)
        for repeat in range(args.repeats):
            for server in servers:
                if server.process is None:
                    server.start()
                else:
                    server.restart()
                await wait_ready(server)
                await warm_up(server)
                await asyncio.sleep(0.3)
                redis_cpu = redis.cpu_seconds()
                result = await measure(server, upstream, server.port, args.streams, 100, 20.0)
                redis_cpu = redis.cpu_seconds() - redis_cpu
                result["redis_cpu_us_per_token"] = redis_cpu / result["tokens"] * 1e6 if result["tokens"] else None
                runs[server.key].append(result)
                log(
                    f"relay {server.key} #{repeat + 1}: {result['completed']}/{args.streams} ok,"
                    f" cpu {result['server_cpu_us_per_token']:.1f} us/token, p99 {result['p99_ms']:.1f} ms,"
                    f" redis {result['redis_cpu_us_per_token']:.2f} us/token"
                )
    finally:
        for server in servers:
            server.stop()
        upstream.stop()
    return runs


async def first_frame_ms(port: int, path: str, headers: str = "") -> float:
    """Time from sending a GET to the first whole frame, on a fresh connection."""
    reader, writer = await asyncio.open_connection(HOST, port)
    try:
        started = time.perf_counter()
        writer.write(f"GET {path} HTTP/1.1\r\nHost: {HOST}\r\n{headers}\r\n".encode())
        received = b""
        while b"\n\n" not in received.partition(b"\r\n\r\n")[2]:
            chunk = await reader.read(65536)
            if not chunk:
                raise RuntimeError(f"closed before a frame: {received[:300]!r}")
            received += chunk
        return (time.perf_counter() - started) * 1000
    finally:
        writer.close()


def percentile(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * q))]


async def resume_part(args, log_dir: Path, redis: Server) -> dict:
    env = {
        "ASSIST_AGENT": COUNTING_AGENT,
        "ASSIST_DETACH_GRACE": GRACE,
        "ASSIST_REDIS_URL": f"redis://{HOST}:{redis.port}/0",
        "ASSIST_LOG_LEVEL": "warning",
    }
    serve = [sys.executable, "-m", "app", "serve", "--host", HOST]
    first = Server("a", "replica a", serve, env, log_dir / "replica-a.log")
    second = Server("b", "replica b", serve, env, log_dir / "replica-b.log")
    out: dict = {}
    try:
        for server in (first, second):
            server.start()
        for server in (first, second):
            await _wait_healthy(server)
        result = await _post(first.port, "count:100:0")
        handle = result["handle"]
        path = f"/assist/runs/{handle}"
        for name, server in (("local", first), ("redis", second)):
            times = [await first_frame_ms(server.port, path) for _ in range(args.resumes)]
            out[f"first_replayed_event_{name}_ms"] = statistics.median(times)
            out[f"first_replayed_event_{name}_p90_ms"] = percentile(times, 0.9)
        events_key, meta_key = f"assist:run:{{{handle}}}:events", f"assist:run:{{{handle}}}:meta"
        out["events_in_run"] = result["events"]
        out["redis_stream_bytes"] = int(redis_command(redis.port, "MEMORY", "USAGE", events_key, "SAMPLES", "0"))
        out["redis_meta_bytes"] = int(redis_command(redis.port, "MEMORY", "USAGE", meta_key, "SAMPLES", "0"))
        out["frame_bytes_in_run"] = result["bytes"]
    finally:
        first.stop()
        second.stop()
    return out


async def _wait_healthy(server: Server) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            reader, writer = await asyncio.open_connection(HOST, server.port)
            writer.write(f"GET /healthz HTTP/1.1\r\nHost: {HOST}\r\nConnection: close\r\n\r\n".encode())
            answer = await reader.read()
            writer.close()
            if b" 200 " in answer.split(b"\r\n", 1)[0]:
                return
        except OSError:
            pass
        await asyncio.sleep(0.1)
    raise RuntimeError(f"{server.label} not healthy:\n{server.log_tail()}")


async def _post(port: int, prompt: str) -> dict:
    body = client.request_body(prompt)
    reader, writer = await asyncio.open_connection(HOST, port)
    writer.write(
        f"POST /assist HTTP/1.1\r\nHost: {HOST}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
        + body
    )
    raw = await reader.read()
    writer.close()
    head, _, rest = raw.partition(b"\r\n\r\n")
    handle = next(
        line.split(b":", 1)[1].strip().decode()
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"assist-run:")
    )
    frames = [block for block in rest.split(b"\n\n") if b"event: " in block]
    return {"handle": handle, "events": len(frames), "bytes": sum(len(block) + 2 for block in frames)}


async def plain_part(args, log_dir: Path) -> dict:
    """bench/run.py's loads: this tree (resumable runs off) against the tree in --baseline."""
    env = {
        "ASSIST_AGENT": "bench.agent:BenchAgent",
        "ASSIST_LOG_LEVEL": "warning",
        "ASSIST_MAX_STREAMS": "100000",
        "ASSIST_MAX_CONNECTIONS": "100000",
    }
    serve = [sys.executable, "-m", "app", "serve", "--host", HOST]
    before = Server("before", "before", ["env", "-C", str(args.baseline), *serve], env, log_dir / "before.log")
    after = Server("after", "after (off)", serve, env, log_dir / "after.log")
    problems = Problems(["before", "after"])
    runs: dict[str, dict[str, list]] = {"before": {}, "after": {}}
    single, concurrent, ttfe = (2000, 5, 20) if args.quick else (20000, 50, 50)
    try:
        for server in (before, after):
            server.start()
            await server.wait_ready()
        for repeat in range(args.repeats + 1):  # the first: a warm-up, not counted
            for server in (before, after) if repeat % 2 == 0 else (after, before):
                figures = {
                    "single": await single_stream(server, single, problems),
                    "concurrent": await concurrent_streams(server, concurrent, 1000, problems),
                    "ttfe": await first_event(server, ttfe, 100, problems),
                }
                if repeat:
                    for load, result in figures.items():
                        runs[server.key].setdefault(load, []).append(result)
                    log(
                        f"plain {server.key} #{repeat}: single {figures['single']['events_per_s']:.0f} ev/s,"
                        f" 50 streams {figures['concurrent']['events_per_s']:.0f} ev/s,"
                        f" first event {figures['ttfe']['ms']:.2f} ms"
                    )
    finally:
        before.stop()
        after.stop()
    return {"runs": runs, "problems": problems.count, "problem_examples": problems.examples}


def median(runs: list[dict], key: str) -> float | None:
    values = [run[key] for run in runs if run.get(key) is not None]
    return statistics.median(values) if values else None


def table(results: dict, markdown: bool) -> str:
    lines: list[str] = []

    def row(*cells: object) -> None:
        lines.append(
            ("| " + " | ".join(str(c) for c in cells) + " |") if markdown else "  ".join(f"{c!s:>14}" for c in cells)
        )

    relay = results.get("relay")
    if relay:
        row("relay, 200 x 100 tokens @ 50/s", "plain", "memory", "redis")
        if markdown:
            lines.append("|---|---|---|---|")
        for key, name, spec in (
            ("server_cpu_us_per_token", "server CPU us/token", ".1f"),
            ("p50_ms", "added latency p50 ms", ".2f"),
            ("p99_ms", "added latency p99 ms", ".2f"),
            ("redis_cpu_us_per_token", "Redis CPU us/token", ".2f"),
            ("kb_per_stream", "RSS KiB per stream", ".1f"),
        ):
            row(name, *(format(median(relay[k], key) or 0, spec) for k in ("plain", "memory", "redis")))
        plain_cpu = median(relay["plain"], "server_cpu_us_per_token") or 1
        row(
            "CPU vs plain",
            "",
            *(
                f"{(median(relay[k], 'server_cpu_us_per_token') or 0) / plain_cpu - 1:+.0%}"
                for k in ("memory", "redis")
            ),
        )
    resume = results.get("resume")
    if resume:
        lines.append("")
        for key, value in resume.items():
            lines.append(f"{key}: {value:.2f}" if isinstance(value, float) else f"{key}: {value}")
    plain = results.get("plain")
    if plain:
        lines.append("")
        row("bench/run.py loads", "before", "after (off)", "change")
        if markdown:
            lines.append("|---|---|---|---|")
        for load, key, name in (
            ("single", "events_per_s", "1 stream, events/s"),
            ("concurrent", "events_per_s", "50 streams, events/s"),
            ("ttfe", "ms", "first event, ms"),
        ):
            b, a = median(plain["runs"]["before"][load], key), median(plain["runs"]["after"][load], key)
            row(name, f"{b:.2f}", f"{a:.2f}", f"{a / b - 1:+.1%}")
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.resumable", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small loads, one repeat")
    parser.add_argument("--repeats", type=int, help="repeats of each load (default 3, quick 1)")
    parser.add_argument("--streams", type=int, help="streams of the relay load (default 200)")
    parser.add_argument("--resumes", type=int, default=50, help="resumes timed per replica (default 50)")
    parser.add_argument("--baseline", type=Path, help="a tree to run bench/run.py's loads against (before)")
    parser.add_argument("--skip-relay", action="store_true", help="leave out the relay load")
    parser.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    parser.add_argument("--out", type=Path, default=BENCH_DIR / "resumable_results.json")
    args = parser.parse_args(argv)
    args.repeats = args.repeats or (1 if args.quick else 3)
    args.streams = args.streams or (50 if args.quick else 200)
    return args


async def main_async(args: argparse.Namespace) -> dict:
    client.raise_open_files_limit()
    log_dir = Path(tempfile.mkdtemp(prefix="bench-resumable-"))
    results: dict = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    redis = start_redis(log_dir)
    try:
        redis_wait(redis.port)
        if not args.skip_relay:
            results["relay"] = await relay_part(args, log_dir, redis)
        results["resume"] = await resume_part(args, log_dir, redis)
    finally:
        redis.stop()
    if args.baseline is not None:
        results["plain"] = await plain_part(args, log_dir)
    return results


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    with asyncio.Runner(loop_factory=client.loop_factory()) as runner:
        results = runner.run(main_async(args))
    args.out.write_text(json.dumps(results, indent=1))
    print(table(results, args.markdown))
    return 0


if __name__ == "__main__":
    sys.exit(main())
