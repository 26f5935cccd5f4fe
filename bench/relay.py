"""The relay load: a model's tokens relayed to the client, ours against the 0.3.0 pattern, in one run.

    python -m bench.relay                 # the full run (about 3 minutes on 2 cores)
    python -m bench.relay --quick         # a smoke run (about 1 minute)
    python -m bench.relay --table         # run nothing: print the table of bench/relay_results.json
    python -m bench.relay --streams 200 --no-saturation --baseline HEAD~1   # this tree against the commit before

A fake OpenAI-compatible upstream (bench/relay_upstream.py, its own process) streams each answer
at a steady pace, each token carrying its send time; the client (bench/relay_client.py) takes,
for every token, receipt time minus send time. Servers, each uvicorn on uvloop + httptools,
on loopback, one process (the last load: two workers):

    chat       python -m app serve, ASSIST_AGENT=chat (our LLMAgent + OpenAIChatModel)
    chat-traced  the same, with OTEL_EXPORTER_OTLP_ENDPOINT set: its spans exported over
               OTLP/HTTP to bench/otlp_sink.py (its own process); only with --only naming it
    ours-0.3   python -m app serve, ASSIST_AGENT=bench.relay_agents:RelayAgent (the 0.3.0
               README's pattern: AsyncOpenAI stream, emit_chunk per delta)
    0.3.0      the 0.3.0 DefaultServer serving the same RelayAgent (reference environment)
    direct     no server: the client reads the upstream itself (the measurement's floor)

Loads, each stream one request for 100 tokens at 50 tokens/s (2 s of streaming), the connects
paced (at most 256 connecting at once), every server restarted (and warmed up) before each
repeat: 200 concurrent streams, and 500. Figures, medians of the repeats: server CPU per token
(process CPU delta / tokens delivered), added latency p50 / p99 over every token of the load,
RSS per stream ((peak while streams are open - before) / streams); with --baseline, the p99 of each
stream's first 10 tokens and of the others apart too. Then saturation: ours (chat)
with 1 worker and with `--workers 2`, 500 streams of 200 tokens at 100 tokens/s each (an
offered 50,000 tokens/s): tokens per second over the middle 80% of the tokens by arrival
(from the 10% point to the 90% point: no ramp up, no tail).

With `--baseline REV`, REV is checked out in a temporary git worktree (bench/servers.py, `worktree`)
and each of our servers (chat, chat-traced, ours-0.3) is served from there too, with the same
interpreter and packages, on its own port: a column `... at REV` beside each, the same loads, the
builds taking turns within each repeat (the order rotated every repeat). `--baseline` may be given
more than once: each REV is one more build in the turns. The saturation loads are this tree's only.
The A/B table gives each figure's median and range over the repeats, and each build against this tree.
With `--gc`, each server notes its garbage collections (bench/gc_probe/sitecustomize.py) and the
table gives, for each load, the collector's CPU time per 10,000 tokens and its full passes.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import itertools
import json
import os
import platform
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench import client
from bench.relay_client import RelayStream
from bench.run import source_state
from bench.servers import HOST, Server, ensure_reference_venv, stack_versions, worktree

BENCH_DIR = Path(__file__).resolve().parent
GC_PROBE = BENCH_DIR / "gc_probe"  # a sitecustomize.py that notes each collection (--gc)
ROOT = BENCH_DIR.parent
CONNECT_GATE = 256
OPENING_TOKENS = 10  # a stream's first tokens, whose p99 the A/B table gives apart from the others'
RSS_SAMPLE_SECONDS = 0.05

FULL = {
    "tokens": 100,
    "interval_ms": 20,
    "streams": [200, 500],
    "repeats": 3,
    "saturation_streams": 500,
    "saturation_tokens": 200,
    "saturation_interval_ms": 10,
    "saturation_repeats": 2,
}
QUICK = {
    "tokens": 50,
    "interval_ms": 20,
    "streams": [50],
    "repeats": 1,
    "saturation_streams": 100,
    "saturation_tokens": 100,
    "saturation_interval_ms": 5,
    "saturation_repeats": 1,
}

# The targets for our chat agent.
MAX_CPU_US_PER_TOKEN = 60.0
MAX_CPU_TIMES_REFERENCE = 0.4
MAX_P99_MS = 25.0
MAX_KB_PER_STREAM = 48.0
MIN_WORKERS_SPEEDUP = 1.7

COLUMNS = [
    ("chat", "ours chat"),
    ("chat-traced", "ours chat, traced"),
    ("ours-0.3", "ours 0.3-style"),
    ("reference", "0.3.0"),
    ("direct", "direct"),
]
SERVER_KEYS = ("chat", "chat-traced", "ours-0.3", "reference")
OURS = ("chat", "chat-traced", "ours-0.3")  # served from each baseline's tree too, with --baseline


def baseline_key(key: str, rev: str) -> str:
    """The key of server `key` of the build REV: "chat@3f0bb09^"."""
    return f"{key}@{rev}"


def log(message: str) -> None:
    print(f"[relay {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def group_cpu_seconds(pid: int) -> float:
    """CPU seconds of every process in `pid`'s process group (a server and its workers)."""
    total = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
            fields = stat[stat.rfind(b")") + 2 :].split()
            if int(fields[2]) != pid:  # pgrp
                continue
            for task in os.listdir(f"/proc/{entry}/task"):
                with open(f"/proc/{entry}/task/{task}/schedstat", "rb") as f:
                    total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return total / 1e9


def app_fingerprint(root: Path = ROOT) -> str:
    """A short hash of every file under sentient_assist/ as it is now: what a server started now imports.

    Another engineer may be editing sentient_assist/ while this runs; each measurement records the fingerprint
    of the code its server started with, and the summary lists every one seen."""
    import hashlib

    digest = hashlib.sha1()
    for path in sorted((root / "sentient_assist").rglob("*.py")):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:12]


def make_upstream(log_dir: Path) -> Server:
    return Server(
        "upstream", "upstream", [sys.executable, "-m", "bench.relay_upstream", "--host", HOST], {}, log_dir / "up.log"
    )


def make_sink(log_dir: Path) -> Server:
    command = [sys.executable, "-m", "bench.otlp_sink", "--host", HOST]
    return Server("sink", "otlp sink", command, {}, log_dir / "sink.log")


def sink_count(sink: Server) -> dict:
    """What the sink has taken so far: requests, spans, bytes."""
    import urllib.request

    with urllib.request.urlopen(f"http://{HOST}:{sink.port}/count", timeout=10) as answer:
        return json.loads(answer.read())


def make_server(
    key: str,
    upstream_port: int,
    log_dir: Path,
    reference_python: str | None,
    workers: int = 1,
    sink_port: int | None = None,
    baseline: tuple[str, Path] | None = None,
) -> Server:
    """The server `key`; with `baseline` (REV, its tree), the same server of that build."""
    server = _make_server(key, upstream_port, log_dir, reference_python, workers, sink_port)
    if baseline is not None:
        rev, tree = baseline
        server.key = baseline_key(key, rev)
        server.label += f" at {rev}"
        server.env = {**server.env, "PYTHONPATH": str(tree)}
        server.cwd = tree
        server.log_path = server.log_path.with_name(f"baseline-{tree.name}-{server.log_path.name}")
    return server


def _make_server(
    key: str,
    upstream_port: int,
    log_dir: Path,
    reference_python: str | None,
    workers: int,
    sink_port: int | None,
) -> Server:
    model = {
        "MODEL_BASE_URL": f"http://{HOST}:{upstream_port}/v1",
        "MODEL_NAME": "relay",
        "MODEL_API_KEY": "x",
        "MODEL_TIMEOUT": "120",
    }
    ours = {
        "ASSIST_LOG_LEVEL": "warning",
        "ASSIST_REQUEST_TIMEOUT": "300",
        "ASSIST_MAX_STREAMS": "100000",
        "ASSIST_MAX_CONNECTIONS": "100000",
        **model,
    }
    serve = [sys.executable, "-m", "app", "serve", "--host", HOST]
    if key == "chat":
        extra = ["--workers", str(workers)] if workers > 1 else []
        label = "ours chat" if workers == 1 else f"ours chat x{workers}"
        return Server("chat", label, serve + extra, {**ours, "ASSIST_AGENT": "chat"}, log_dir / f"chat{workers}.log")
    if key == "chat-traced":
        assert sink_port is not None
        traced = {
            **ours,
            "ASSIST_AGENT": "chat",
            "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://{HOST}:{sink_port}",
            "OTEL_SERVICE_NAME": "bench-relay",
        }
        return Server("chat-traced", "ours chat, traced", serve, traced, log_dir / "chat-traced.log")
    if key == "ours-0.3":
        return Server(
            "ours-0.3",
            "ours 0.3-style",
            serve,
            {**ours, "ASSIST_AGENT": "bench.relay_agents:RelayAgent"},
            log_dir / "ours03.log",
        )
    if key == "reference":
        assert reference_python is not None
        return Server(
            "reference",
            "0.3.0",
            [reference_python, "-m", "bench.reference_server", "--host", HOST, *REFERENCE_AGENT],
            model,
            log_dir / "reference.log",
        )
    raise ValueError(key)


# The 0.3.0 server runs bench/relay_agents.py's agent, in bench/reference_server.py.
REFERENCE_AGENT = ["--agent", "bench.relay_agents:RelayAgent", "--name", "relay"]


def ensure_reference_openai(log=log) -> str:
    """The reference environment, with the openai package its agent imports (installed once)."""
    python = ensure_reference_venv(log=log)
    import subprocess

    if subprocess.run([python, "-c", "import openai"], capture_output=True, cwd="/").returncode != 0:
        import importlib.metadata as m

        requirement = f"openai=={m.version('openai')}"  # the version ours uses
        log(f"installing {requirement} into the reference environment")
        subprocess.run(
            [python, "-m", "pip", "install", "-q", "--disable-pip-version-check", requirement], check=True, timeout=600
        )
    return python


async def relay_load(
    port: int, streams: int, tokens: int, interval_ms: float, *, direct: bool = False, sample=None, timeout: float = 120
) -> tuple[list[RelayStream], list]:
    prompt = f"relay:{tokens}:{interval_ms:g}"
    gate = asyncio.Semaphore(CONNECT_GATE)
    all_streams = [RelayStream(HOST, port, prompt, expect_tokens=tokens, direct=direct) for _ in range(streams)]
    samples: list[tuple[int, int]] = []  # (rss KiB, finished)
    finished = [0]

    async def one(s: RelayStream) -> None:
        try:
            await s.run(gate, timeout)
        finally:
            finished[0] += 1

    async def sampler() -> None:
        while True:
            samples.append((sample(), finished[0]))
            await asyncio.sleep(RSS_SAMPLE_SECONDS)

    task = asyncio.create_task(sampler()) if sample else None
    try:
        await asyncio.gather(*(one(s) for s in all_streams))
    finally:
        if task:
            task.cancel()
    return all_streams, samples


async def wait_ready(server: Server, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        if server.process is None or server.process.poll() is not None:
            raise RuntimeError(f"{server.label} exited at start:\n{server.log_tail()}")
        s = await RelayStream(HOST, server.port, "relay:3:1", expect_tokens=3).run(None, 10)
        if s.ok:
            return
        last = "; ".join(s.problems)
        await asyncio.sleep(0.3)
    raise RuntimeError(f"{server.label} not ready after {timeout}s ({last}):\n{server.log_tail()}")


async def warm_up(server: Server) -> None:
    streams, _ = await relay_load(server.port, 20, 20, 2, timeout=60)
    bad = [s for s in streams if not s.ok]
    if bad:
        raise RuntimeError(f"{server.label} warm-up: {len(bad)} bad streams, e.g. {bad[0].problems}")


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * q))]


async def measure(
    server: Server | None,
    upstream: Server,
    port: int,
    streams: int,
    tokens: int,
    interval_ms: float,
    *,
    direct: bool = False,
) -> dict:
    """One load: figures and checks."""
    cpu0 = group_cpu_seconds(server.pid) if server else 0.0
    up0, own0 = upstream.cpu_seconds(), time.process_time()
    before = server.rss_kb() if server and not direct else None
    t0 = time.time()
    results, samples = await relay_load(
        port,
        streams,
        tokens,
        interval_ms,
        direct=direct,
        sample=server.rss_kb if server and before is not None else None,
    )
    wall = time.time() - t0
    cpu = (group_cpu_seconds(server.pid) - cpu0) if server else None
    up, own = upstream.cpu_seconds() - up0, time.process_time() - own0
    delivered = sum(s.tokens for s in results)
    latencies = [x for s in results for x in s.latencies]
    # A tail held at each stream's start (its headers, its first read) against one spread over the load.
    opening = [x for s in results for x in s.latencies[:OPENING_TOKENS]]
    rest = [x for s in results for x in s.latencies[OPENING_TOKENS:]]
    ok = sum(1 for s in results if s.ok)
    firsts = [s.t_first for s in results if s.t_first]
    lasts = [s.t_last for s in results if s.t_last]
    span = (max(lasts) - min(firsts)) if firsts and lasts else None
    # The steady state: the middle 80% of the tokens (by arrival), without the ramp up and the tail.
    steady = window = None
    reads = sorted(r for s in results for r in s.reads)
    if reads and delivered >= 100:
        lo, hi = 0.1 * delivered, 0.9 * delivered
        seen, t_lo, t_hi = 0, None, None
        for t, n in reads:
            seen += n
            if t_lo is None and seen >= lo:
                t_lo, at_lo = t, seen
            if seen >= hi:
                t_hi, at_hi = t, seen
                break
        if t_lo is not None and t_hi is not None and t_hi > t_lo:
            window = t_hi - t_lo
            steady = (at_hi - at_lo) / window
    out = {
        "streams": streams,
        "tokens_per_stream": tokens,
        "interval_ms": interval_ms,
        "completed": ok,
        "tokens": delivered,
        "started_at": t0,
        "wall_s": round(wall, 3),
        "tokens_per_s": delivered / span if span else None,
        "steady_tokens_per_s": steady,
        "steady_window_s": window,
        "server_cpu_us_per_token": cpu / delivered * 1e6 if cpu is not None and delivered else None,
        "server_cores": cpu / span if cpu is not None and span else None,
        "upstream_cpu_us_per_token": up / delivered * 1e6 if delivered else None,
        "upstream_cores": up / span if span else None,
        "client_busy": own / span if span else None,
        "p50_ms": (percentile(latencies, 0.5) or 0) * 1000 if latencies else None,
        "p90_ms": (percentile(latencies, 0.9) or 0) * 1000 if latencies else None,
        "p99_ms": (percentile(latencies, 0.99) or 0) * 1000 if latencies else None,
        "max_ms": max(latencies) * 1000 if latencies else None,
        "p99_opening_ms": (percentile(opening, 0.99) or 0) * 1000 if opening else None,
        "p99_rest_ms": (percentile(rest, 0.99) or 0) * 1000 if rest else None,
        "problems": [f"{'; '.join(s.problems)}" for s in results if not s.ok][:5],
    }
    if before is not None:
        waiting = [rss for rss, finished in samples if finished == 0]
        peak = max(waiting or [rss for rss, _ in samples] or [before])
        out.update(rss_before_kb=before, rss_peak_kb=peak, kb_per_stream=(peak - before) / streams)
    return out


def collections_during(path: Path, r: dict) -> dict:
    """The collections a server noted (bench/gc_probe) while the load `r` ran: by generation, and
    their CPU and longest wall time."""
    try:
        noted = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    during = [c for c in noted if r["started_at"] <= c[1] <= r["started_at"] + r["wall_s"]]
    return {
        "collections": [sum(1 for c in during if c[0] == generation) for generation in (0, 1, 2)],
        "cpu_ms": sum(c[3] for c in during) * 1000,
        "cpu_ms_per_10k_tokens": sum(c[3] for c in during) * 1000 * 10_000 / max(r["tokens"], 1),
        "longest_ms": max((c[2] for c in during), default=0.0) * 1000,
        "full_cpu_ms": sum(c[3] for c in during if c[0] == 2) * 1000,
        "full_at_s": [round(c[1] - r["started_at"], 3) for c in during if c[0] == 2],  # since the load began
    }


def med(runs: list[dict], key: str):
    values = [r[key] for r in runs if r.get(key) is not None]
    return statistics.median(values) if values else None


async def run_all(
    args, loads: dict, log_dir: Path, reference_python: str | None, baselines: dict[str, Path] | None = None
) -> dict:
    upstream = make_upstream(log_dir)
    upstream.start()
    servers: list[Server] = []
    sink: Server | None = None
    runs: dict[str, dict[str, list]] = {}
    try:
        await asyncio.sleep(0.5)
        direct = await RelayStream(HOST, upstream.port, "relay:3:1", expect_tokens=3, direct=True).run(None, 10)
        if not direct.ok:
            raise RuntimeError(f"upstream not answering: {direct.problems}\n{upstream.log_tail()}")
        log(f"upstream on port {upstream.port} (pid {upstream.pid})")
        keys = [k for k in SERVER_KEYS if k in args.servers]
        if "chat-traced" in keys:
            sink = make_sink(log_dir)
            sink.start()
            await asyncio.sleep(0.5)
        sink_port = sink.port if sink is not None else None
        servers = [make_server(k, upstream.port, log_dir, reference_python, sink_port=sink_port) for k in keys]
        for k in keys:
            if k not in OURS:
                continue
            at = servers.index(next(s for s in servers if s.key == k)) + 1
            for baseline in reversed((baselines or {}).items()):  # each beside its twin of this tree
                twin = make_server(k, upstream.port, log_dir, None, sink_port=sink_port, baseline=baseline)
                servers.insert(at, twin)
        keys = [s.key for s in servers]
        for n in loads["streams"]:
            for key in [*keys, "direct"]:
                runs.setdefault(key, {}).setdefault(str(n), [])
        started = itertools.count()
        for rep in range(loads["repeats"]):
            for n in loads["streams"]:
                # The order rotated each repeat: no build is always measured first, or after the same one.
                for server in servers[rep % len(servers) :] + servers[: rep % len(servers)]:
                    # A fresh process each repeat: RSS grows from the same kind of baseline.
                    gc_log = log_dir / f"gc-{next(started)}.json"
                    if args.gc:  # the probe first on the path, then the build's own tree
                        server.env.update(PYTHONPATH=f"{GC_PROBE}:{server.cwd}", BENCH_GC_LOG=str(gc_log))
                    if server.process is None:
                        server.start()
                    else:
                        server.restart()
                    code = app_fingerprint(server.cwd)
                    await wait_ready(server)
                    await warm_up(server)
                    await asyncio.sleep(0.3)
                    traced = server.key.startswith("chat-traced")
                    exported = sink_count(sink) if sink is not None and traced else None
                    r = await measure(server, upstream, server.port, n, loads["tokens"], loads["interval_ms"])
                    r["app_fingerprint"] = code
                    if exported is not None and sink is not None:
                        await asyncio.sleep(1.0)  # the batch processor's last export (its schedule: 5 s at most)
                        server.stop()  # its shutdown flushes what is left
                        await asyncio.sleep(0.5)
                        after = sink_count(sink)
                        r["spans_exported"] = after["spans"] - exported["spans"]
                        r["export_bytes"] = after["bytes"] - exported["bytes"]
                    if args.gc:
                        # Its collections are written at exit: uvicorn ends a SIGTERM by raising it again
                        # (no atexit), a SIGINT by KeyboardInterrupt (a normal exit).
                        server.stop(signal_number=signal.SIGINT)
                        r["gc"] = collections_during(gc_log, r)
                    runs[server.key][str(n)].append(r)
                    log(_line(server.label, n, rep, r))
                r = await measure(None, upstream, upstream.port, n, loads["tokens"], loads["interval_ms"], direct=True)
                runs["direct"][str(n)].append(r)
                log(_line("direct", n, rep, r))
        for server in servers:
            server.stop()
        saturation: dict[str, list] = {}
        if "chat" in args.servers and loads["saturation_repeats"]:
            for workers in (1, 2):
                saturation[str(workers)] = []
                server = make_server("chat", upstream.port, log_dir, None, workers=workers)
                servers.append(server)
                for rep in range(loads["saturation_repeats"]):
                    if server.process is None:
                        server.start()
                    else:
                        server.restart()
                    code = app_fingerprint()
                    await wait_ready(server)
                    await warm_up(server)
                    await asyncio.sleep(0.3)
                    r = await measure(
                        server,
                        upstream,
                        server.port,
                        loads["saturation_streams"],
                        loads["saturation_tokens"],
                        loads["saturation_interval_ms"],
                    )
                    r["app_fingerprint"] = code
                    saturation[str(workers)].append(r)
                    log(
                        f"saturation  workers={workers} #{rep + 1}: {r['steady_tokens_per_s'] or 0:,.0f} tokens/s "
                        f"steady ({r['steady_window_s'] or 0:.1f} s), {r['tokens_per_s'] or 0:,.0f} overall, "
                        f"{r['completed']}/{r['streams']} ok, server {r['server_cores'] or 0:.2f} cores, "
                        f"upstream {r['upstream_cores'] or 0:.2f}, client {r['client_busy'] or 0:.2f}"
                    )
                server.stop()
    except BaseException:
        for s in [*servers, upstream]:
            tail = s.log_tail(10)
            if tail:
                log(f"{s.label} log, last lines:\n{tail}")
        raise
    finally:
        for s in servers:
            s.stop()
        if sink is not None:
            sink.stop()
        upstream.stop()
    return {"runs": runs, "saturation": saturation}


def _line(label: str, n: int, rep: int, r: dict) -> str:
    cpu = r["server_cpu_us_per_token"]
    kb = r.get("kb_per_stream")
    return (
        f"{n:>4} streams {label:>14} #{rep + 1}: {r['completed']}/{n} ok, "
        f"{'-' if cpu is None else f'{cpu:.1f}'} us CPU/token, added p50 {r['p50_ms'] or 0:.2f} / "
        f"p99 {r['p99_ms'] or 0:.2f} ms, {'-' if kb is None else f'{kb:.1f}'} KB/stream, "
        f"upstream {r['upstream_cpu_us_per_token'] or 0:.1f} us/token, client {r['client_busy'] or 0:.0%}"
    )


def summarize(measured: dict, loads: dict) -> dict:
    out: dict = {"loads": {}, "saturation": {}}
    for key, by_n in measured["runs"].items():
        for n, runs in by_n.items():
            if not runs:
                continue
            out["loads"].setdefault(n, {})[key] = {
                "server_cpu_us_per_token": med(runs, "server_cpu_us_per_token"),
                "p50_ms": med(runs, "p50_ms"),
                "p99_ms": med(runs, "p99_ms"),
                "kb_per_stream": med(runs, "kb_per_stream"),
                "completed_worst": min(r["completed"] for r in runs),
                "streams": runs[0]["streams"],
                "upstream_cpu_us_per_token": med(runs, "upstream_cpu_us_per_token"),
                "upstream_cores": med(runs, "upstream_cores"),
                "client_busy": med(runs, "client_busy"),
                "server_cores": med(runs, "server_cores"),
            }
            if any("spans_exported" in r for r in runs):
                out["loads"][n][key]["spans_exported"] = med(runs, "spans_exported")
                out["loads"][n][key]["export_bytes"] = med(runs, "export_bytes")
    for workers, runs in measured["saturation"].items():
        out["saturation"][workers] = {
            "tokens_per_s": med(runs, "tokens_per_s"),
            "steady_tokens_per_s": med(runs, "steady_tokens_per_s"),
            "server_cpu_us_per_token": med(runs, "server_cpu_us_per_token"),
            "server_cores": med(runs, "server_cores"),
            "upstream_cores": med(runs, "upstream_cores"),
            "client_busy": med(runs, "client_busy"),
            "completed_worst": min(r["completed"] for r in runs),
            "streams": runs[0]["streams"],
        }
    return out


def targets(summary: dict, loads: dict) -> list[dict]:
    def check(name, value, ok, shown):
        if value is None:
            return {"target": name, "value": None, "shown": "not measured", "result": "n/a"}
        return {"target": name, "value": value, "shown": shown, "result": "PASS" if ok else "FAIL"}

    n = "200" if "200" in summary["loads"] else str(loads["streams"][0])
    at = summary["loads"].get(n, {})
    chat, ref = at.get("chat", {}), at.get("reference", {})
    cpu, ref_cpu = chat.get("server_cpu_us_per_token"), ref.get("server_cpu_us_per_token")
    p99 = chat.get("p99_ms")
    kbs = [summary["loads"][m]["chat"]["kb_per_stream"] for m in summary["loads"] if "chat" in summary["loads"][m]]
    kb = max((k for k in kbs if k is not None), default=None)
    sat = summary["saturation"]
    speedup = (
        sat["2"]["steady_tokens_per_s"] / sat["1"]["steady_tokens_per_s"]
        if "1" in sat and "2" in sat and sat["1"]["steady_tokens_per_s"] and sat["2"]["steady_tokens_per_s"]
        else None
    )
    ratio = cpu / ref_cpu if cpu is not None and ref_cpu else None
    return [
        check(
            f"server CPU per token at {n} streams: at most {MAX_CPU_US_PER_TOKEN:g} us",
            cpu,
            cpu is not None and cpu <= MAX_CPU_US_PER_TOKEN,
            f"{cpu or 0:.1f} us",
        ),
        check(
            f"server CPU per token at {n} streams: at most {MAX_CPU_TIMES_REFERENCE:g}x the 0.3.0 pattern",
            ratio,
            ratio is not None and ratio <= MAX_CPU_TIMES_REFERENCE,
            f"{ratio or 0:.2f}x",
        ),
        check(
            f"p99 added latency at {n} streams: at most {MAX_P99_MS:g} ms",
            p99,
            p99 is not None and p99 <= MAX_P99_MS,
            f"{p99 or 0:.2f} ms",
        ),
        check(
            f"RSS per LLM stream (worst load): at most {MAX_KB_PER_STREAM:g} KB",
            kb,
            kb is not None and kb <= MAX_KB_PER_STREAM,
            f"{kb or 0:.1f} KB",
        ),
        check(
            f"--workers 2: tokens/s at saturation at least {MIN_WORKERS_SPEEDUP:g}x 1 worker",
            speedup,
            speedup is not None and speedup >= MIN_WORKERS_SPEEDUP,
            f"{speedup or 0:.2f}x",
        ),
        check(
            "every stream completes with all its tokens and done",
            all(v["completed_worst"] == v["streams"] for m in summary["loads"].values() for v in m.values()),
            all(v["completed_worst"] == v["streams"] for m in summary["loads"].values() for v in m.values()),
            "yes"
            if all(v["completed_worst"] == v["streams"] for m in summary["loads"].values() for v in m.values())
            else "no",
        ),
    ]


def _fmt(value, spec: str) -> str:
    return "" if value is None else format(value, spec)


def columns(results: dict) -> list[tuple[str, str]]:
    """The servers measured, as (key, label): each of ours followed by its baseline twins, if any."""
    out = []
    for key, label in COLUMNS:
        out.append((key, label))
        if key in OURS:
            out += [(baseline_key(key, b["rev"]), f"{label} at {b['rev']}") for b in results.get("baselines", ())]
    return [(k, label) for k, label in out if any(k in m for m in results["summary"]["loads"].values())]


def table(results: dict, markdown: bool = False) -> str:
    summary = results["summary"]
    present = columns(results)
    head = ["metric", *[label for _, label in present], "chat/0.3.0"]
    rows = []
    metrics = [
        ("server CPU us per token", "server_cpu_us_per_token", ".1f"),
        ("added latency p50, ms", "p50_ms", ".2f"),
        ("added latency p99, ms", "p99_ms", ".2f"),
        ("RSS per stream, KB", "kb_per_stream", ".1f"),
        ("streams completed (worst repeat)", "completed_worst", "d"),
        ("server busy, cores", "server_cores", ".2f"),
        ("upstream CPU us per token", "upstream_cpu_us_per_token", ".1f"),
        ("client busy (share of one core)", "client_busy", ".0%"),
        ("spans exported", "spans_exported", ",.0f"),
    ]
    for n in sorted(summary["loads"], key=int):
        at = summary["loads"][n]
        for title, key, spec in metrics:
            values = [at.get(k, {}).get(key) for k, _ in present]
            chat, ref = at.get("chat", {}).get(key), at.get("reference", {}).get(key)
            ratio = (
                f"{chat / ref:.2f}x"
                if key in ("server_cpu_us_per_token", "p50_ms", "p99_ms", "kb_per_stream") and chat is not None and ref
                else ""
            )
            rows.append([f"{title}, {int(n):,} streams", *[_fmt(v, spec) for v in values], ratio])
    sat = summary["saturation"]
    if sat:
        rows.append(["", *["" for _ in present], ""])
        for workers in sorted(sat):
            s = sat[workers]
            rows.append(
                [
                    f"saturation, {workers} worker(s): tokens/s, middle 80% ({s['streams']} x "
                    f"{results['loads']['saturation_tokens']} tokens, "
                    f"{results['loads']['saturation_interval_ms']:g} ms "
                    "apart)",
                    _fmt(s["steady_tokens_per_s"], ",.0f"),
                    *["" for _ in present[1:]],
                    "",
                ]
            )
            rows.append(
                [
                    f"saturation, {workers} worker(s): tokens/s, first token to last",
                    _fmt(s["tokens_per_s"], ",.0f"),
                    *["" for _ in present[1:]],
                    "",
                ]
            )
            rows.append(
                [
                    f"saturation, {workers} worker(s): server cores / us per token",
                    f"{s['server_cores'] or 0:.2f} / {s['server_cpu_us_per_token'] or 0:.1f}",
                    *["" for _ in present[1:]],
                    "",
                ]
            )
            rows.append(
                [
                    f"saturation, {workers} worker(s): upstream cores / client busy",
                    f"{s['upstream_cores'] or 0:.2f} / {s['client_busy'] or 0:.0%}",
                    *["" for _ in present[1:]],
                    "",
                ]
            )
            rows.append(
                [
                    f"saturation, {workers} worker(s): streams completed",
                    f"{s['completed_worst']}/{s['streams']}",
                    *["" for _ in present[1:]],
                    "",
                ]
            )
    out = []
    if results.get("baselines"):
        out += [ab_table(results, markdown), ""]
    if markdown:
        out.append("| " + " | ".join(head) + " |")
        out.append("|---|" + "---:|" * (len(head) - 1))
        out += ["| " + " | ".join(r) + " |" for r in rows]
        out.append("")
        out.append("| target (ours, chat agent) | measured | result |")
        out.append("|---|---:|---|")
        out += [f"| {t['target']} | {t['shown']} | **{t['result']}** |" for t in results["targets"]]
    else:
        widths = [max(len(str(r[i])) for r in [head, *rows]) for i in range(len(head))]

        def fmt(r: list) -> str:
            cells = zip(r, widths, strict=False)
            return "  ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w) for i, (c, w) in enumerate(cells))

        out.append(fmt(head))
        out.append("-" * len(fmt(head)))
        out += [fmt(r) for r in rows]
        out.append("")
        out += [f"{t['result']:>4}  {t['target']}: {t['shown']}" for t in results["targets"]]
    return "\n".join(out)


def ab_table(results: dict, markdown: bool = False) -> str:
    """This tree against the baselines, server by server and load by load: each figure's median over
    the repeats, its range in brackets, and the ratio of the medians (this tree's over the baseline's)."""
    revs = [b["rev"] for b in results["baselines"]]
    head = ["streams", "server", "build", "repeats", "CPU us/token", "added p50, ms", "added p99, ms"]
    head += [f"p99, first {OPENING_TOKENS} tokens", "p99, the others"]
    rows = []
    figures = [("server_cpu_us_per_token", ".1f"), ("p50_ms", ".2f"), ("p99_ms", ".2f")]
    figures += [("p99_opening_ms", ".2f"), ("p99_rest_ms", ".2f")]
    measured = results["runs"]["runs"]
    if any("gc" in r for by_n in measured.values() for runs in by_n.values() for r in runs):
        head += ["gc CPU ms per 10k tokens", "full passes", "longest pass, ms"]
        figures += [("gc_cpu_ms_per_10k_tokens", ".1f"), ("gc_full", ".0f"), ("gc_longest_ms", ".1f")]
        for r in (r for by_n in measured.values() for runs in by_n.values() for r in runs if r.get("gc")):
            r["gc_cpu_ms_per_10k_tokens"] = r["gc"]["cpu_ms_per_10k_tokens"]
            r["gc_full"], r["gc_longest_ms"] = r["gc"]["collections"][2], r["gc"]["longest_ms"]
    for n in sorted({n for by_n in measured.values() for n in by_n}, key=int):
        for key, label in COLUMNS:
            builds = [("this tree", measured.get(key, {}).get(n))]
            builds += [(rev, measured.get(baseline_key(key, rev), {}).get(n)) for rev in revs]
            if not builds[0][1] or not any(runs for _, runs in builds[1:]):
                continue
            medians: dict[str, list] = {}
            for build, runs in builds:
                if not runs:
                    continue
                cells = []
                for figure, spec in figures:
                    values = [r[figure] for r in runs if r.get(figure) is not None]
                    medians.setdefault(build, []).append(statistics.median(values) if values else None)
                    cells.append(
                        f"{statistics.median(values):{spec}} ({min(values):{spec}}-{max(values):{spec}})"
                        if values
                        else ""
                    )
                rows.append([n, label, build, str(len(runs)), *cells])
            ours = medians["this tree"]
            for rev in revs:
                if rev in medians:
                    ratios = [
                        f"{a / b:.2f}x" if a is not None and b else "" for a, b in zip(ours, medians[rev], strict=True)
                    ]
                    rows.append([n, label, f"this tree / {rev}", "", *ratios])
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|---:|---|---|" + "---:|" * (len(head) - 3)]
        return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])
    widths = [max(len(str(r[i])) for r in [head, *rows]) for i in range(len(head))]
    return "\n".join(
        "  ".join(c.ljust(w) if 0 < i < 3 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True)))
        for r in [head, *rows]
    )


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m bench.relay", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small loads, one repeat: a smoke run")
    parser.add_argument("--repeats", type=int, help="repeats of each load (default 3, quick 1)")
    parser.add_argument(
        "--only", default="chat,ours-0.3,reference", help="servers: chat, chat-traced, ours-0.3, reference"
    )
    parser.add_argument("--streams", help="the loads' concurrent streams, comma-separated (default 200,500)")
    parser.add_argument("--no-saturation", action="store_true", help="leave out the saturation loads")
    parser.add_argument("--table", action="store_true", help="run nothing: print the table of the JSON (--out)")
    parser.add_argument("--markdown", action="store_true", help="also print the table as Markdown")
    parser.add_argument("--out", type=Path, help="JSON path (default bench/relay_results.json, quick: -quick)")
    parser.add_argument(
        "--gc", action="store_true", help="note each server's garbage collections during each load (bench/gc_probe)"
    )
    parser.add_argument(
        "--baseline",
        metavar="REV",
        action="append",
        default=[],
        help="a git revision whose servers are measured beside this tree's, in turn (may be repeated)",
    )
    args = parser.parse_args(argv)
    args.servers = [s.strip() for s in args.only.split(",")]
    if args.out is None:
        args.out = BENCH_DIR / ("relay_results-quick.json" if args.quick else "relay_results.json")
    return args


async def main_async(args) -> dict:
    loads = dict(QUICK if args.quick else FULL)
    if args.repeats:
        loads["repeats"] = args.repeats
    if args.streams:
        loads["streams"] = [int(n) for n in args.streams.split(",")]
    if args.no_saturation:
        loads["saturation_repeats"] = 0
    started = time.time()
    load_start = os.getloadavg()
    source = source_state()
    import subprocess

    # Before any load starts: nothing else is running on the loop to be held up.
    status = subprocess.run(  # noqa: ASYNC221
        ["git", "status", "--porcelain", "--", "sentient_assist"], cwd=ROOT, capture_output=True, text=True
    )
    source["git_status_porcelain_app"] = status.stdout.splitlines()
    source["app_fingerprint_at_start"] = app_fingerprint()
    reference_python = ensure_reference_openai() if "reference" in args.servers else None
    baselines: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="bench-relay-") as log_dir, contextlib.ExitStack() as stack:
        trees: dict[str, Path] = {}
        for number, rev in enumerate(args.baseline):
            trees[rev] = tree = stack.enter_context(worktree(rev, Path(log_dir) / f"baseline{number}"))
            commit = subprocess.run(  # noqa: ASYNC221
                ["git", "rev-parse", "--short", "HEAD"], cwd=tree, capture_output=True, text=True
            )
            baselines.append({"rev": rev, "commit": commit.stdout.strip()})
        measured = await run_all(args, loads, Path(log_dir), reference_python, trees)
    summary = summarize(measured, loads)
    stack = {"ours": stack_versions(sys.executable)}
    if reference_python:
        stack["reference"] = stack_versions(reference_python)
    results = {
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "command": "python -m bench.relay " + " ".join(sys.argv[1:]),
        "quick": args.quick,
        "loads": loads,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "stack": stack},
        "source": source,
        **({"baselines": baselines} if baselines else {}),
        "load_average": {"start": [round(x, 2) for x in load_start], "end": [round(x, 2) for x in os.getloadavg()]},
        "duration_s": round(time.time() - started, 1),
        "summary": summary,
        "runs": measured,
    }
    results["targets"] = targets(summary, loads)
    seen = sorted(
        {
            r["app_fingerprint"]
            for key, by_n in measured["runs"].items()
            if "@" not in key  # a baseline's worktree is nobody's to edit
            for runs in by_n.values()
            for r in runs
            if "app_fingerprint" in r
        }
        | {r["app_fingerprint"] for runs in measured["saturation"].values() for r in runs}
    )
    source["app_fingerprints_seen"] = seen
    if len(seen) > 1:
        log(f"warning: sentient_assist/ changed during the run ({len(seen)} versions measured: {', '.join(seen)})")
    return results


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.table:
        results = json.loads(args.out.read_text())
    else:
        client.raise_open_files_limit()
        with asyncio.Runner(loop_factory=client.loop_factory()) as runner:
            results = runner.run(main_async(args))
        args.out.write_text(json.dumps(results, indent=1) + "\n")
    print(table(results))
    if args.markdown:
        print("\n" + table(results, markdown=True))
    if not args.table:
        print(f"\nwrote {args.out}")
    return 0 if all(t["result"] != "FAIL" for t in results["targets"]) else 1


if __name__ == "__main__":
    sys.exit(main())
