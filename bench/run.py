"""The /assist benchmark: this service, the 0.3.0 DefaultServer and a bare ASGI floor, in one run.

    python -m bench.run                 # the full run (about 4 minutes on 2 cores)
    python -m bench.run --quick         # a smoke run with small loads (about 30 s)
    python -m bench.run --only ours,bare --repeats 3
    python -m bench.run --only ours --baseline HEAD~1   # this tree against the commit before, in one run

It starts the three servers on loopback ports, drives each with the same client
(bench/client.py), and runs every load against every server, repeats
interleaved between the servers so that a burst of noise from elsewhere on the
machine does not land on one server only:

    single      one stream of 20,000 chunks                 events/s
    concurrent  50 concurrent streams of 1,000 chunks       events/s, all of them over the wall time
    ttfe        50 sequential requests of stream:100        time to the first event, ms
    waiting     5,000 concurrent streams of wait:10         RSS per stream, completed streams

Every response is checked: status, the number of chunks, closing chunks and
events, one `done` and nothing after it, ids strictly increasing. A response
that fails a check is counted under `streams with problems`, whatever the load.

With `--baseline REV`, REV is served as well (a column "ours at REV"), from a temporary git
worktree (bench/servers.py, `worktree`: the same interpreter and packages), taking its turn
with the others in every repeat; a first table gives ours against it, medians and ranges.

The table goes to stdout; the same figures, each repeat's raw values and the
machine's description go to bench/results.json, and the plot to
bench/results.png (results-quick.* for --quick).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench import client, report
from bench.servers import HOST, Server, ensure_reference_venv, make_servers, stack_versions, worktree

BENCH_DIR = Path(__file__).resolve().parent
ALL_SERVERS = ["ours", "reference", "bare"]
SERVER_ALIASES = {"ours": "ours", "reference": "reference", "0.3.0": "reference", "ref": "reference", "bare": "bare"}

FULL = {
    "single_chunks": 20_000,
    "concurrent_streams": 50,
    "concurrent_chunks": 1_000,
    "ttfe_requests": 50,
    "ttfe_chunks": 100,
    "waiting_streams": 5_000,
    "waiting_seconds": 10,
}
QUICK = {
    "single_chunks": 2_000,
    "concurrent_streams": 10,
    "concurrent_chunks": 200,
    "ttfe_requests": 10,
    "ttfe_chunks": 100,
    "waiting_streams": 200,
    "waiting_seconds": 1,
}
# Streams that are connecting at once in the waiting load: below uvicorn's listen backlog (2048).
CONNECT_GATE = 256
RSS_SAMPLE_SECONDS = 0.05


def log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


class Problems:
    """Responses that failed a check, per server: counted, and a few kept as examples."""

    def __init__(self, keys: list[str]) -> None:
        self.count = {key: 0 for key in keys}
        self.examples: dict[str, list[str]] = {key: [] for key in keys}

    def add(self, server: Server, load: str, result: client.StreamResult) -> None:
        if result.ok:
            return
        self.count[server.key] += 1
        if len(self.examples[server.key]) < 10:
            self.examples[server.key].append(f"{load} {result.prompt}: {'; '.join(result.problems)}")


async def single_stream(server: Server, chunks: int, problems: Problems) -> dict:
    cpu, own = server.cpu_seconds(), time.process_time()
    result = await client.assist(HOST, server.port, f"stream:{chunks}", timeout=120)
    cpu, own = server.cpu_seconds() - cpu, time.process_time() - own
    problems.add(server, "single", result)
    seconds = result.t_end - result.t_send
    return {
        "events": result.events,
        "seconds": seconds,
        "events_per_s": result.events / seconds if result.ok else 0.0,
        "server_cpu_us_per_event": cpu / max(result.events, 1) * 1e6,
        "client_busy": own / seconds,  # share of one core the client used: near 1.0, the client is the limit
        "ok": result.ok,
    }


async def concurrent_streams(server: Server, streams: int, chunks: int, problems: Problems) -> dict:
    cpu, own = server.cpu_seconds(), time.process_time()
    t0 = time.perf_counter()
    results = await asyncio.gather(
        *(client.assist(HOST, server.port, f"stream:{chunks}", timeout=180) for _ in range(streams))
    )
    seconds = max(r.t_end for r in results) - t0
    cpu, own = server.cpu_seconds() - cpu, time.process_time() - own
    for r in results:
        problems.add(server, "concurrent", r)
    events = sum(r.events for r in results)
    ok = all(r.ok for r in results)
    return {
        "events": events,
        "seconds": seconds,
        "events_per_s": events / seconds if ok else 0.0,
        "server_cpu_us_per_event": cpu / max(events, 1) * 1e6,
        "client_busy": own / seconds,
        "ok": ok,
    }


async def first_event(server: Server, requests: int, chunks: int, problems: Problems) -> dict:
    times = []
    for _ in range(requests):
        result = await client.assist(HOST, server.port, f"stream:{chunks}", timeout=30)
        problems.add(server, "ttfe", result)
        if result.ok and result.ttfe is not None:
            times.append(result.ttfe * 1000)
    if not times:
        return {"ms": None, "p90_ms": None, "min_ms": None, "requests": requests, "ok": False}
    times.sort()
    return {
        "ms": statistics.median(times),
        "p90_ms": times[min(len(times) - 1, int(len(times) * 0.9))],
        "min_ms": times[0],
        "requests": requests,
        "ok": len(times) == requests,
    }


async def waiting_streams(server: Server, streams: int, seconds: float, problems: Problems) -> dict:
    """`streams` concurrent wait:S streams; the server's RSS before, and at its peak while all are open."""
    prompt = f"wait:{seconds:g}"
    expect = client.expectations(prompt)
    timeout = seconds + 90
    gate = asyncio.Semaphore(CONNECT_GATE)
    state = {"open": 0, "finished": 0}
    samples: list[tuple[float, int, int, int]] = []  # (t, rss KiB, open, finished)

    async def one() -> client.StreamResult:
        stream = client.SseStream(HOST, server.port, prompt, **expect)
        try:
            async with asyncio.timeout(timeout):
                async with gate:
                    await stream.start()
                state["open"] += 1
                return await stream.finish()
        except TimeoutError:
            stream.result.problems.append(f"timed out after {timeout}s")
        except (OSError, client.ProtocolError, ValueError) as exc:
            stream.result.problems.append(f"{type(exc).__name__}: {exc}")
        finally:
            stream.close()
            state["finished"] += 1
        return stream.result

    async def sample() -> None:
        while True:
            samples.append((time.perf_counter(), server.rss_kb(), state["open"], state["finished"]))
            await asyncio.sleep(RSS_SAMPLE_SECONDS)

    before = server.rss_kb()
    t0 = time.perf_counter()
    sampler = asyncio.create_task(sample())
    try:
        results = await asyncio.gather(*(one() for _ in range(streams)))
    finally:
        sampler.cancel()
    t_end = time.perf_counter()
    for r in results:
        problems.add(server, "waiting", r)
    waiting_samples = [s for s in samples if s[3] == 0]  # no stream has ended yet: every open one is waiting
    all_open = [s for s in waiting_samples if s[2] == streams]
    peak = max((s[1] for s in waiting_samples), default=max(s[1] for s in samples))
    completed = sum(1 for r in results if r.ok)
    opened_at = max((r.t_headers for r in results if r.t_headers), default=None)
    await asyncio.sleep(1.0)
    return {
        "streams": streams,
        "completed": completed,
        "rss_before_kb": before,
        "rss_peak_kb": peak,
        "rss_after_kb": server.rss_kb(),
        "kb_per_stream": (peak - before) / streams,
        "all_open_seen": bool(all_open),
        "seconds_to_open_all": (opened_at - t0) if opened_at else None,
        "seconds": t_end - t0,
        "ok": completed == streams,
    }


async def warm_up_waiting(server: Server, problems: Problems) -> None:
    """A fresh server's first requests: one-time costs (imports, caches) out of the way before measuring."""
    for _ in range(3):
        problems.add(server, "warm-up", await client.assist(HOST, server.port, "stream:100", timeout=30))
    results = await asyncio.gather(*(client.assist(HOST, server.port, "wait:0.2", timeout=30) for _ in range(100)))
    for r in results:
        problems.add(server, "warm-up", r)


def median_of(runs: list[dict], key: str):
    values = [run[key] for run in runs if run.get(key) is not None]
    return statistics.median(values) if values else None


def source_state() -> dict:
    """The commit measured, and the files under sentient_assist/, app/ and agents/ that differ from it."""
    import subprocess

    def git(*argv: str) -> str:
        try:
            out = subprocess.run(["git", *argv], cwd=BENCH_DIR.parent, capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.SubprocessError):
            return ""
        return out.stdout.rstrip("\n") if out.returncode == 0 else ""

    changed = git("status", "--porcelain", "--", "sentient_assist", "app", "agents", "pyproject.toml")
    return {
        "commit": git("rev-parse", "--short", "HEAD").strip() or None,
        "uncommitted": [line[3:] for line in changed.splitlines()],
    }


def machine_info(servers: list[Server], reference_python: str | None) -> dict:
    cpu_model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    info = {
        "cpus": os.cpu_count(),
        "cpu_model": cpu_model,
        "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "stack": {"ours": stack_versions(sys.executable)},
        "client_loop": "uvloop" if client.loop_factory() else "asyncio",
    }
    if reference_python:
        info["stack"]["reference"] = stack_versions(reference_python)
    return info


def in_turn(servers: list[Server], rep: int) -> list[Server]:
    """The servers in the order of repeat `rep`: rotated each repeat, so that none is always first."""
    return servers[rep % len(servers) :] + servers[: rep % len(servers)]


async def run_loads(servers: list[Server], loads: dict, repeats: int, wait_repeats: int, problems: Problems) -> dict:
    runs: dict[str, dict[str, list]] = {
        s.key: {"single": [], "concurrent": [], "ttfe": [], "waiting": []} for s in servers
    }

    log("warming up")
    for server in servers:
        await single_stream(server, loads["single_chunks"], problems)
        await concurrent_streams(server, loads["concurrent_streams"], loads["concurrent_chunks"], problems)
        await first_event(server, 5, loads["ttfe_chunks"], problems)

    for rep in range(repeats):
        for server in in_turn(servers, rep):
            r = await single_stream(server, loads["single_chunks"], problems)
            runs[server.key]["single"].append(r)
            log(
                f"single      {server.label:>6} #{rep + 1}: {r['events_per_s']:>9,.0f} events/s  "
                f"(server {r['server_cpu_us_per_event']:.1f} us CPU/event, client busy {r['client_busy']:.0%})"
            )
    for rep in range(repeats):
        for server in in_turn(servers, rep):
            r = await concurrent_streams(server, loads["concurrent_streams"], loads["concurrent_chunks"], problems)
            runs[server.key]["concurrent"].append(r)
            log(
                f"concurrent  {server.label:>6} #{rep + 1}: {r['events_per_s']:>9,.0f} events/s  "
                f"(server {r['server_cpu_us_per_event']:.1f} us CPU/event, client busy {r['client_busy']:.0%})"
            )
    for rep in range(repeats):
        for server in in_turn(servers, rep):
            r = await first_event(server, loads["ttfe_requests"], loads["ttfe_chunks"], problems)
            runs[server.key]["ttfe"].append(r)
            ms = "-" if r["ms"] is None else f"{r['ms']:.2f}"
            log(f"ttfe        {server.label:>6} #{rep + 1}: {ms} ms median")
    for rep in range(wait_repeats):
        for server in in_turn(servers, rep):
            # A fresh process for each repeat: every repeat measures growth from the same kind of
            # baseline, not over a heap that an earlier repeat already grew.
            server.restart()
            await server.wait_ready()
            await warm_up_waiting(server, problems)
            log(
                f"waiting     {server.label:>6} #{rep + 1}: {loads['waiting_streams']} streams of "
                f"wait:{loads['waiting_seconds']:g} (fresh server, pid {server.pid})"
            )
            r = await waiting_streams(server, loads["waiting_streams"], loads["waiting_seconds"], problems)
            runs[server.key]["waiting"].append(r)
            log(
                f"waiting     {server.label:>6} #{rep + 1}: {r['completed']}/{r['streams']} completed, "
                f"{r['kb_per_stream']:.1f} KB/stream, all open in {r['seconds_to_open_all'] or 0:.1f}s"
            )
    return runs


def summarize(servers: list[Server], runs: dict, problems: Problems) -> dict:
    summary = {}
    for server in servers:
        r = runs[server.key]
        summary[server.key] = {
            "label": server.label,
            "single_events_per_s": median_of(r["single"], "events_per_s"),
            "concurrent_events_per_s": median_of(r["concurrent"], "events_per_s"),
            "ttfe_ms": median_of(r["ttfe"], "ms"),
            "ttfe_p90_ms": median_of(r["ttfe"], "p90_ms"),
            "rss_kb_per_stream": median_of(r["waiting"], "kb_per_stream"),
            "waiting_completed": min((w["completed"] for w in r["waiting"]), default=None),
            "waiting_streams": r["waiting"][0]["streams"] if r["waiting"] else None,
            "waiting_seconds_to_open_all": median_of(r["waiting"], "seconds_to_open_all"),
            "waiting_all_open_seen": all(w["all_open_seen"] for w in r["waiting"]) if r["waiting"] else None,
            "streams_with_problems": problems.count[server.key],
            "problem_examples": problems.examples[server.key],
            "single_server_cpu_us_per_event": median_of(r["single"], "server_cpu_us_per_event"),
            "concurrent_server_cpu_us_per_event": median_of(r["concurrent"], "server_cpu_us_per_event"),
            "single_client_busy": median_of(r["single"], "client_busy"),
            "concurrent_client_busy": median_of(r["concurrent"], "client_busy"),
        }
    return summary


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small loads and one repeat: a smoke run")
    parser.add_argument("--repeats", type=int, help="repeats of each throughput and ttfe load (default 5, quick 1)")
    parser.add_argument(
        "--wait-repeats",
        type=int,
        help="repeats of the 5,000 waiting streams load, each on freshly started servers (default 3, quick 1)",
    )
    parser.add_argument(
        "--only",
        default=",".join(ALL_SERVERS),
        help="servers to run, comma-separated: ours, 0.3.0 (or reference), bare",
    )
    parser.add_argument(
        "--replot",
        action="store_true",
        help="run nothing: print the table of the results JSON (--out) and redraw its PNG",
    )
    parser.add_argument(
        "--markdown", action="store_true", help="also print the table as Markdown (for bench/README.md)"
    )
    parser.add_argument(
        "--out",
        type=Path,
        help="JSON path (default bench/results.json, quick: bench/results-quick.json); the PNG goes beside it",
    )
    parser.add_argument(
        "--baseline", metavar="REV", help="a git revision whose service is measured beside ours, in turn"
    )
    args = parser.parse_args(argv)
    keys = []
    for name in args.only.split(","):
        name = name.strip()
        if name not in SERVER_ALIASES:
            parser.error(f"--only: unknown server {name!r}; use ours, 0.3.0, bare")
        if SERVER_ALIASES[name] not in keys:
            keys.append(SERVER_ALIASES[name])
    args.servers = [k for k in ALL_SERVERS if k in keys]
    if args.repeats is None:
        args.repeats = 1 if args.quick else 5
    if args.wait_repeats is None:
        args.wait_repeats = 1 if args.quick else 3
    if args.repeats < 1 or args.wait_repeats < 0:
        parser.error("--repeats must be 1 or more, --wait-repeats 0 or more")
    if args.out is None:
        args.out = BENCH_DIR / ("results-quick.json" if args.quick else "results.json")
    return args


async def main_async(args: argparse.Namespace) -> dict:
    loads = dict(QUICK if args.quick else FULL)
    started = time.time()
    load_start = os.getloadavg()
    source = source_state()
    reference_python = ensure_reference_venv(log=log) if "reference" in args.servers else None
    with tempfile.TemporaryDirectory(prefix="bench-logs-") as log_dir, contextlib.ExitStack() as stack:
        servers = make_servers(args.servers, Path(log_dir), reference_python, loads["waiting_seconds"])
        if args.baseline:
            tree = stack.enter_context(worktree(args.baseline, Path(log_dir) / "baseline"))
            [ours] = make_servers(["ours"], Path(log_dir), None, loads["waiting_seconds"])
            ours.key, ours.label, ours.cwd = "baseline", f"ours at {args.baseline}", tree
            ours.env["PYTHONPATH"], ours.log_path = str(tree), Path(log_dir) / "baseline.log"
            servers.insert(1, ours)  # beside ours: they take turns
        problems = Problems([s.key for s in servers])
        try:
            for server in servers:
                server.start()
            for server in servers:
                await server.wait_ready()
                log(f"{server.label} server ready on port {server.port} (pid {server.pid})")
            runs = await run_loads(servers, loads, args.repeats, args.wait_repeats, problems)
        except BaseException:
            for server in servers:
                tail = server.log_tail(10)
                if tail:
                    log(f"{server.label} server log, last lines:\n{tail}")
            raise
        finally:
            for server in servers:
                server.stop()
        summary = summarize(servers, runs, problems)
    return {
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "command": "python -m bench.run " + " ".join(sys.argv[1:]),
        "quick": args.quick,
        "repeats": args.repeats,
        "wait_repeats": args.wait_repeats,
        "loads": loads,
        "machine": machine_info(servers, reference_python),
        "source": source,
        **({"baseline": args.baseline} if args.baseline else {}),
        "load_average": {"start": [round(x, 2) for x in load_start], "end": [round(x, 2) for x in os.getloadavg()]},
        "duration_s": round(time.time() - started, 1),
        "servers": summary,
        "ratios": report.ratios(summary),
        "targets": report.targets(summary, loads),
        "runs": runs,
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.replot:
        import json

        results = json.loads(args.out.read_text())
        print(report.table(results))
        if args.markdown:
            print("\n" + report.table(results, markdown=True))
        png = report.write(results, args.out, json_too=False)
        print(f"\nredrew {png}" if png else "\nno PNG: matplotlib is not installed")
        return 0
    limit = client.raise_open_files_limit()
    loads = QUICK if args.quick else FULL
    if limit < loads["waiting_streams"] + 1000:
        log(f"warning: the open files limit is {limit}; the waiting load needs more than {loads['waiting_streams']}")
    with asyncio.Runner(loop_factory=client.loop_factory()) as runner:
        results = runner.run(main_async(args))
    print(report.table(results))
    if args.markdown:
        print("\n" + report.table(results, markdown=True))
    png = report.write(results, args.out)
    print(f"\nwrote {args.out}" + (f" and {png}" if png else " (no PNG: matplotlib is not installed)"))
    return 0 if all(t["result"] != "FAIL" for t in results["targets"]) else 1


if __name__ == "__main__":
    sys.exit(main())
