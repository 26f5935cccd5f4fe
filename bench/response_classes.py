"""POST /assist with three response classes, in one run: what each costs per waiting stream and per event.

    python -m bench.response_classes                    # the full run (about 2 minutes on 2 cores)
    python -m bench.response_classes --quick            # a smoke run with small loads
    python -m bench.response_classes --repeats 5 --wait-repeats 3
    python -m bench.response_classes --table --markdown # print the table of the JSON, run nothing
    python -m bench.response_classes --batched --out /tmp/rc.json   # and sse-starlette, batched

Three uvicorn servers (uvloop, httptools, one process each, on loopback), identical
but for the response class of POST /assist (bench/response_class_apps.py):

    ours           EventStream, the service as it is
    fastapi-sse    an async generator path operation, response_class=fastapi.sse.EventSourceResponse
    sse-starlette  sse_starlette.EventSourceResponse over an async generator of the frames

Loads, the repeats interleaved between the servers (bench/run.py's load functions and
bench/client.py's checks: every response is checked, whatever the load):

    1 stream     stream:20000                                events/s, server CPU us per event
    50 streams   50 concurrent stream:1000                   events/s, server CPU us per event
    waiting      5,000 concurrent wait:10, on a freshly      (peak RSS - RSS before) / 5,000,
                 restarted server                            completed streams

With --batched, a fourth server, sse-starlette-batched: the same generator, but each batch
of frames that were ready together joined into one item (one send per batch, as ours).

And one behaviour check per server: two streams (a waiting one and a fast one) whose
client leaves early must each end as `disconnected` on the server (its /metrics), the
agent cancelled, and no stream left open.

Every load has a time bound, and loads not yet started when the run is over its budget
(--budget) are skipped; the servers are stopped at the end whatever happens (SIGTERM
and Ctrl-C included). The table goes to stdout, progress to stderr, the figures and
each repeat's raw values to bench/response_classes.json.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

from bench import client
from bench.run import (
    Problems,
    concurrent_streams,
    machine_info,
    median_of,
    single_stream,
    source_state,
    waiting_streams,
    warm_up_waiting,
)
from bench.servers import HOST, Server, make_servers

BENCH_DIR = Path(__file__).resolve().parent
DEFAULT_OUT = BENCH_DIR / "response_classes.json"

# key (column), uvicorn factory in bench/response_class_apps.py
VARIANTS = [
    ("ours", "ours"),
    ("fastapi-sse", "fastapi_sse"),
    ("sse-starlette", "sse_starlette"),
]
# With --batched: sse-starlette yielding each batch of ready frames as one item.
BATCHED = ("sse-starlette-batched", "sse_starlette_batched")
COLUMNS = [key for key, _ in VARIANTS] + [BATCHED[0]]

FULL = {
    "single_chunks": 20_000,
    "concurrent_streams": 50,
    "concurrent_chunks": 1_000,
    "waiting_streams": 5_000,
    "waiting_seconds": 10,
}
QUICK = {
    "single_chunks": 2_000,
    "concurrent_streams": 10,
    "concurrent_chunks": 200,
    "waiting_streams": 200,
    "waiting_seconds": 1,
}
# Time bounds of one load, seconds: far above what a working server needs (a second or two
# for the throughput loads, wait:10 plus under 10 s of connecting for the waiting load).
SINGLE_BOUND = 60.0
CONCURRENT_BOUND = 90.0
WAITING_SLACK = 60.0  # on top of the wait itself
DISCONNECT_BOUND = 20.0
DEFAULT_BUDGET = 330.0  # seconds; loads not started by then are skipped


def log(message: str) -> None:
    print(f"[response-classes {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def make_variant_servers(log_dir: Path, wait_seconds: float, batched: bool = False) -> list[Server]:
    """The servers: one uvicorn command line, one environment (the one bench/servers.py
    gives `ours`), only the app factory differs."""
    (ours,) = make_servers(["ours"], log_dir, None, wait_seconds)
    servers = []
    for key, factory in VARIANTS + ([BATCHED] if batched else []):
        command = [
            sys.executable,
            "-m",
            "uvicorn",
            "--factory",
            f"bench.response_class_apps:{factory}",
            "--host",
            HOST,
            "--loop",
            "uvloop",
            "--http",
            "httptools",
            "--no-access-log",  # the service logs requests itself (at warning level: not at all here)
            "--log-level",
            "warning",
            "--timeout-graceful-shutdown",
            "5",
        ]
        servers.append(Server(key, key, command, dict(ours.env), log_dir / f"{key}.log"))
    return servers


class Clock:
    """The run's budget: a load is started only if it can end (at its bound) before it is spent."""

    def __init__(self, budget: float) -> None:
        self.start = time.monotonic()
        self.budget = budget
        self.skipped: list[str] = []

    def allows(self, what: str, expected: float) -> bool:
        if time.monotonic() - self.start + expected <= self.budget:
            return True
        self.skipped.append(what)
        log(f"skipped (over the {self.budget:g} s budget): {what}")
        return False


async def bounded(what: str, seconds: float, coro, server: Server, problems: Problems, cut: list[str]):
    """`coro`'s result, or None when it ran past `seconds` (counted as a problem of the server)."""
    try:
        async with asyncio.timeout(seconds):
            return await coro
    except TimeoutError:
        cut.append(f"{server.key}: {what}")
        result = client.StreamResult(what, problems=[f"the load was cut off after {seconds:g} s"])
        problems.add(server, what, result)
        log(f"{what} {server.label}: cut off after {seconds:g} s")
        return None


# -- the behaviour check: a client that leaves ends the stream and cancels the agent --------------


async def server_metrics(server: Server) -> dict[str, float]:
    """The server's /metrics, as {name: value} for unlabelled samples."""
    reader, writer = await asyncio.open_connection(HOST, server.port)
    try:
        writer.write(f"GET /metrics HTTP/1.1\r\nHost: {HOST}\r\nConnection: close\r\n\r\n".encode())
        data = await reader.read()
    finally:
        writer.close()
    head, _, body = data.partition(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 200"):
        raise RuntimeError(f"/metrics answered {head[:40]!r}")
    values = {}
    for line in body.decode().splitlines():
        if line and not line.startswith("#") and "{" not in line:
            name, _, value = line.rpartition(" ")
            values[name] = float(value)
    return values


async def disconnect_check(server: Server) -> dict:
    """Two streams the client leaves early: one waiting (wait:60), one streaming as fast as it can
    (stream:100000000, blocked on the unread socket). Each must end on the server as
    `disconnected` (the agent cancelled by then: Run.reader_left) and leave no stream open."""
    before = await server_metrics(server)
    streams = [client.SseStream(HOST, server.port, "wait:60"), client.SseStream(HOST, server.port, "stream:100000000")]
    for stream in streams:
        await stream.start()
    await asyncio.sleep(0.5)  # the fast one fills the socket buffers; the waiting one waits
    left = time.perf_counter()
    for stream in streams:
        stream.close()
    seen: dict[str, float] = {}
    while time.perf_counter() - left < 10:
        await asyncio.sleep(0.05)
        now = await server_metrics(server)
        seen = {
            "disconnects": now.get("assist_disconnects_total", 0) - before.get("assist_disconnects_total", 0),
            "streams_open": now.get("assist_streams_open", 0),
        }
        if seen["disconnects"] >= 2 and seen["streams_open"] == 0:
            return {"ok": True, "seconds": round(time.perf_counter() - left, 3), **seen}
    return {"ok": False, "seconds": None, **seen}


# -- the run ----------------------------------------------------------------------------------------


def rotated(servers: list[Server], rep: int) -> list[Server]:
    """A different server first in each repeat: no server always runs right after the same one."""
    k = rep % len(servers)
    return servers[k:] + servers[:k]


async def run_loads(
    servers: list[Server], loads: dict, repeats: int, wait_repeats: int, problems: Problems, clock: Clock
) -> tuple[dict, dict, list[str]]:
    runs: dict[str, dict[str, list]] = {s.key: {"single": [], "concurrent": [], "waiting": []} for s in servers}
    behaviour: dict[str, dict] = {}
    cut: list[str] = []
    stalled: set[str] = set()  # a server that ran past a bound runs no more throughput loads
    single = (loads["single_chunks"], problems)
    concurrent = (loads["concurrent_streams"], loads["concurrent_chunks"], problems)

    log("warming up")
    for server in servers:
        if not clock.allows(f"warm-up {server.key}", SINGLE_BOUND + CONCURRENT_BOUND):
            continue
        warm = await bounded("warm-up single", SINGLE_BOUND, single_stream(server, *single), server, problems, cut)
        if warm is not None:
            warm = await bounded(
                "warm-up concurrent", CONCURRENT_BOUND, concurrent_streams(server, *concurrent), server, problems, cut
            )
        if warm is None:
            stalled.add(server.key)

    for rep in range(repeats):
        for server in rotated(servers, rep):
            if server.key in stalled or not clock.allows(f"single {server.key} #{rep + 1}", SINGLE_BOUND):
                continue
            r = await bounded("single", SINGLE_BOUND, single_stream(server, *single), server, problems, cut)
            if r is None:
                stalled.add(server.key)
                continue
            runs[server.key]["single"].append(r)
            log(
                f"single      {server.label:>13} #{rep + 1}: {r['events_per_s']:>9,.0f} events/s  "
                f"(server {r['server_cpu_us_per_event']:.1f} us CPU/event, client busy {r['client_busy']:.0%})"
            )
    for rep in range(repeats):
        for server in rotated(servers, rep):
            if server.key in stalled or not clock.allows(f"concurrent {server.key} #{rep + 1}", CONCURRENT_BOUND):
                continue
            r = await bounded(
                "concurrent", CONCURRENT_BOUND, concurrent_streams(server, *concurrent), server, problems, cut
            )
            if r is None:
                stalled.add(server.key)
                continue
            runs[server.key]["concurrent"].append(r)
            log(
                f"concurrent  {server.label:>13} #{rep + 1}: {r['events_per_s']:>9,.0f} events/s  "
                f"(server {r['server_cpu_us_per_event']:.1f} us CPU/event, client busy {r['client_busy']:.0%})"
            )

    for server in servers:
        if server.key in stalled or not clock.allows(f"disconnect check {server.key}", DISCONNECT_BOUND):
            continue
        try:
            async with asyncio.timeout(DISCONNECT_BOUND):
                behaviour[server.key] = await disconnect_check(server)
        except (TimeoutError, OSError, RuntimeError, client.ProtocolError) as exc:
            behaviour[server.key] = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        b = behaviour[server.key]
        log(
            f"disconnect  {server.label:>13}: "
            + (f"both streams ended as disconnected in {b['seconds']} s" if b["ok"] else f"FAILED {b}")
        )

    waiting_bound = loads["waiting_seconds"] + WAITING_SLACK
    for rep in range(wait_repeats):
        for server in rotated(servers, rep):
            if not clock.allows(f"waiting {server.key} #{rep + 1}", waiting_bound + 30):
                continue
            # A fresh process for each repeat (as bench/run.py does): growth from the same baseline.
            server.restart()
            await server.wait_ready()
            await bounded("warm-up waiting", 30, warm_up_waiting(server, problems), server, problems, cut)
            log(
                f"waiting     {server.label:>13} #{rep + 1}: {loads['waiting_streams']} streams of "
                f"wait:{loads['waiting_seconds']:g} (fresh server, pid {server.pid})"
            )
            r = await bounded(
                "waiting",
                waiting_bound,
                waiting_streams(server, loads["waiting_streams"], loads["waiting_seconds"], problems),
                server,
                problems,
                cut,
            )
            if r is None:
                continue
            runs[server.key]["waiting"].append(r)
            log(
                f"waiting     {server.label:>13} #{rep + 1}: {r['completed']}/{r['streams']} completed, "
                f"{r['kb_per_stream']:.1f} KB/stream, all open in {r['seconds_to_open_all'] or 0:.1f}s"
            )
    return runs, behaviour, cut


def summarize(servers: list[Server], runs: dict, behaviour: dict, problems: Problems) -> dict:
    summary = {}
    for server in servers:
        r = runs[server.key]
        summary[server.key] = {
            "single_events_per_s": median_of(r["single"], "events_per_s"),
            "concurrent_events_per_s": median_of(r["concurrent"], "events_per_s"),
            "single_server_cpu_us_per_event": median_of(r["single"], "server_cpu_us_per_event"),
            "concurrent_server_cpu_us_per_event": median_of(r["concurrent"], "server_cpu_us_per_event"),
            "rss_kb_per_stream": median_of(r["waiting"], "kb_per_stream"),
            "waiting_completed": min((w["completed"] for w in r["waiting"]), default=None),
            "waiting_streams": r["waiting"][0]["streams"] if r["waiting"] else None,
            "waiting_seconds_to_open_all": median_of(r["waiting"], "seconds_to_open_all"),
            "waiting_all_open_seen": all(w["all_open_seen"] for w in r["waiting"]) if r["waiting"] else None,
            "streams_with_problems": problems.count[server.key],
            "problem_examples": problems.examples[server.key],
            "disconnect_check": behaviour.get(server.key),
            "single_client_busy": median_of(r["single"], "client_busy"),
            "concurrent_client_busy": median_of(r["concurrent"], "client_busy"),
        }
    return summary


# -- the table --------------------------------------------------------------------------------------


def _fmt(value, kind: str) -> str:
    if value is None:
        return "-"
    if kind == "rate":
        return f"{value:,.0f}"
    if kind in ("us", "kb", "s"):
        return f"{value:.1f}"
    if kind == "pct":
        return f"{value:.0%}"
    if kind == "check":
        return "yes" if value.get("ok") else "NO"
    return str(value)


def table(results: dict, markdown: bool = False) -> str:
    loads, summary = results["loads"], results["servers"]
    keys = [key for key in COLUMNS if key in summary]
    others = [key for key in keys if key != "ours"]
    rows = [
        (f"events/s, 1 stream x {loads['single_chunks']:,} chunks", "single_events_per_s", "rate", True),
        (
            f"events/s, {loads['concurrent_streams']} streams x {loads['concurrent_chunks']:,} chunks",
            "concurrent_events_per_s",
            "rate",
            True,
        ),
        ("server CPU us per event, 1 stream", "single_server_cpu_us_per_event", "us", True),
        (
            f"server CPU us per event, {loads['concurrent_streams']} streams",
            "concurrent_server_cpu_us_per_event",
            "us",
            True,
        ),
        (
            f"RSS per waiting stream, KB ({loads['waiting_streams']:,} x wait:{loads['waiting_seconds']:g})",
            "rss_kb_per_stream",
            "kb",
            True,
        ),
        (
            f"waiting streams completed (of {loads['waiting_streams']:,}, worst repeat)",
            "waiting_completed",
            "int",
            False,
        ),
        (
            f"seconds until all {loads['waiting_streams']:,} waiting streams are open",
            "waiting_seconds_to_open_all",
            "s",
            True,
        ),
        ("streams with problems (lost, reordered, failed)", "streams_with_problems", "int", False),
        ("client left: stream ended, agent cancelled", "disconnect_check", "check", False),
        ("client busy, 1 stream (share of one core)", "single_client_busy", "pct", False),
    ]
    head = ["metric", *keys, *(f"{key}/ours" for key in others)]
    body = []
    for title, metric, kind, ratio in rows:
        values = {key: summary[key].get(metric) for key in keys}
        line = [title, *(_fmt(values[key], kind) for key in keys)]
        for key in others:
            ours, other = values.get("ours"), values[key]
            line.append(f"{other / ours:.2f}x" if ratio and ours and other is not None else "")
        body.append(line)
    if markdown:
        out = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
        out += ["| " + " | ".join(line) + " |" for line in body]
        return "\n".join(out)
    widths = [max(len(line[i]) for line in [head, *body]) for i in range(len(head))]

    def fmt(line: list[str]) -> str:
        return "  ".join(cell.ljust(widths[i]) if i == 0 else cell.rjust(widths[i]) for i, cell in enumerate(line))

    machine, source = results["machine"], results["source"]
    changed = source.get("uncommitted") or []
    out = [
        (
            f"{results['date']}; {machine['cpus']} cores, {machine['cpu_model']}; Python {machine['python']}; "
            f"{results['repeats']} repeats (medians), {results['wait_repeats']} waiting; {results['duration_s']} s; "
            f"load average {results['load_average']['start'][0]} -> {results['load_average']['end'][0]}"
        ),
        f"commit {source.get('commit')}" + (f", with uncommitted changes to {', '.join(changed)}" if changed else ""),
        "",
        fmt(head),
        fmt(["-" * w for w in widths]),
        *(fmt(line) for line in body),
    ]
    for note in results.get("cut_off") or []:
        out.append(f"  cut off at its time bound: {note}")
    for note in results.get("skipped") or []:
        out.append(f"  skipped (over budget): {note}")
    for key in keys:
        if summary[key].get("waiting_all_open_seen") is False:
            out.append(
                f"  note ({key}): the first waiting stream ended before the last had opened; "
                "its RSS peak is the highest before the first ended"
            )
        for example in summary[key].get("problem_examples") or []:
            out.append(f"  problem ({key}): {example}")
        check = summary[key].get("disconnect_check")
        if check and not check.get("ok"):
            out.append(f"  disconnect check ({key}): {check}")
    return "\n".join(out)


# -- main -------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.response_classes", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small loads: a smoke run (writes no JSON unless --out)")
    parser.add_argument("--repeats", type=int, default=3, help="repeats of each throughput load (default 3)")
    parser.add_argument(
        "--wait-repeats",
        type=int,
        default=1,
        help="repeats of the waiting load, each on freshly restarted servers (default 1)",
    )
    parser.add_argument(
        "--batched",
        action="store_true",
        help="a fourth server: sse-starlette yielding each batch of ready frames as one item",
    )
    parser.add_argument(
        "--budget",
        type=float,
        default=DEFAULT_BUDGET,
        help=f"seconds; loads that could not end within it are skipped (default {DEFAULT_BUDGET:g})",
    )
    parser.add_argument("--out", type=Path, help=f"the JSON (default {DEFAULT_OUT.relative_to(BENCH_DIR.parent)})")
    parser.add_argument("--table", action="store_true", help="run nothing: print the table of the JSON (--out)")
    parser.add_argument("--markdown", action="store_true", help="also print the table as Markdown")
    args = parser.parse_args(argv)
    if args.repeats < 1 or args.wait_repeats < 0:
        parser.error("--repeats must be 1 or more, --wait-repeats 0 or more")
    if args.out is None and (not args.quick or args.table):
        args.out = DEFAULT_OUT
    return args


async def main_async(args: argparse.Namespace) -> dict:
    loads = dict(QUICK if args.quick else FULL)
    started = time.time()
    load_start = os.getloadavg()
    source = source_state()
    clock = Clock(args.budget)
    # SIGTERM ends the run as Ctrl-C does: the task is cancelled, the servers are stopped below.
    loop, task = asyncio.get_running_loop(), asyncio.current_task()
    assert task is not None
    loop.add_signal_handler(signal.SIGTERM, task.cancel)
    with tempfile.TemporaryDirectory(prefix="bench-response-classes-") as log_dir:
        servers = make_variant_servers(Path(log_dir), loads["waiting_seconds"], args.batched)
        problems = Problems([s.key for s in servers])
        try:
            for server in servers:
                server.start()
            for server in servers:
                await server.wait_ready()
                log(f"{server.label} server ready on port {server.port} (pid {server.pid})")
            runs, behaviour, cut = await run_loads(servers, loads, args.repeats, args.wait_repeats, problems, clock)
        except BaseException:
            for server in servers:
                tail = server.log_tail(10)
                if tail:
                    log(f"{server.label} server log, last lines:\n{tail}")
            raise
        finally:
            for server in servers:
                try:
                    server.stop()
                except Exception as exc:
                    log(f"stopping {server.label}: {type(exc).__name__}: {exc}")
            loop.remove_signal_handler(signal.SIGTERM)
        summary = summarize(servers, runs, behaviour, problems)
    return {
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "command": "python -m bench.response_classes " + " ".join(sys.argv[1:]),
        "quick": args.quick,
        "repeats": args.repeats,
        "wait_repeats": args.wait_repeats,
        "loads": loads,
        "servers_started_as": {s.key: " ".join(s.command[1:]) for s in servers},
        "machine": machine_info(servers, None),
        "source": source,
        "load_average": {"start": [round(x, 2) for x in load_start], "end": [round(x, 2) for x in os.getloadavg()]},
        "duration_s": round(time.time() - started, 1),
        "servers": summary,
        "cut_off": cut,
        "skipped": clock.skipped,
        "runs": runs,
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.table:
        results = json.loads(args.out.read_text())
    else:
        limit = client.raise_open_files_limit()
        loads = QUICK if args.quick else FULL
        if limit < loads["waiting_streams"] + 1000:
            log(
                f"warning: the open files limit is {limit}; the waiting load needs more than {loads['waiting_streams']}"
            )
        try:
            with asyncio.Runner(loop_factory=client.loop_factory()) as runner:
                results = runner.run(main_async(args))
        except (asyncio.CancelledError, KeyboardInterrupt):
            log("interrupted: the servers are stopped, nothing written")
            return 130
        if args.out is not None:
            args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(table(results))
    if args.markdown:
        print("\n" + table(results, markdown=True))
    if not args.table:
        print(f"\nwrote {args.out}" if args.out else "\n(no JSON written: --quick without --out)")
    bad = any(
        s["streams_with_problems"] or not (s.get("disconnect_check") or {}).get("ok", False)
        for s in results["servers"].values()
    )
    return 1 if bad or results.get("cut_off") else 0


if __name__ == "__main__":
    sys.exit(main())
