"""The cost of an MCP tool call, over stdio and over streamable HTTP, next to a function tool's, in one run.

    python -m bench.mcp_tools               # the full run: about a minute on 2 cores
    python -m bench.mcp_tools --quick       # a smoke run
    python -m bench.mcp_tools --markdown    # also the table as Markdown (bench/README.md's)

Each target is one tool, `echo(text) -> text`, called as an LLMAgent calls it: `Tool.call()`
with the arguments' JSON, a ToolOutcome back, checked. This process runs on uvloop, as the
service does.

    function   an async function made a Tool with @tool, in this process
    stdio      MCPServerStdio: the same function on the mcp SDK's MCPServer, this file run as
               the service's child (`--serve stdio`), over its stdin and stdout
    http       MCPServerStreamableHTTP: the same server over streamable HTTP on loopback, in
               a process of its own (`--serve http`: uvicorn, as the SDK runs it)

Loads, one target after the other:

    open        the first use: the server started (stdio) or connected to (http), its tools listed
    sequential  N calls one after another: median and p99 latency
    concurrent  50 calls at once, R rounds: calls per second (the median round)
    CPU         per call of the sequential load: this process's, and the server's (from /proc)

The servers are stopped at the end, on failure too.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from bench.servers import free_port, port_taken

ROOT = Path(__file__).resolve().parents[1]
ARGUMENTS = json.dumps({"text": "hello, tool"})
CONCURRENCY = 50
FULL = {"calls": 3000, "rounds": 40, "warm_up": 300}
QUICK = {"calls": 300, "rounds": 5, "warm_up": 50}
TICK = os.sysconf("SC_CLK_TCK")


def serve(transport: str, port: int) -> None:
    """The bench's MCP server: `echo`, and `pid` (to read its CPU time)."""
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("bench", log_level="WARNING")

    @server.tool()
    async def echo(text: str) -> str:
        """Say the text back."""
        return text

    @server.tool()
    def pid() -> int:
        """The server process's id."""
        return os.getpid()

    if transport == "stdio":
        server.run()
    else:
        server.run("streamable-http", host="127.0.0.1", port=port)


def cpu_seconds(pid: int | None) -> float:
    """A process's CPU time (user and system), from /proc; this process's when pid is None."""
    if pid is None:
        return time.process_time()
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def start_http_server() -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    output = tempfile.TemporaryFile()  # a file, never a pipe nobody reads past the start
    process = subprocess.Popen(
        [sys.executable, "-m", "bench.mcp_tools", "--serve", "http", "--port", str(port)],
        cwd=ROOT,
        stderr=output,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            output.seek(0)
            error = output.read().decode(errors="replace")
            if port_taken(error):
                return start_http_server()  # another process took the port first: another one
            raise RuntimeError(f"the HTTP server exited with {process.returncode}:\n{error[-2000:]}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return process, f"http://127.0.0.1:{port}/mcp"
        except OSError:
            time.sleep(0.05)
    process.kill()
    raise RuntimeError("the HTTP server did not listen within 30 s")


async def measure(
    call: Callable[[str], Awaitable[Any]], server_pid: int | None, loads: dict[str, int]
) -> dict[str, float]:
    """Latency, throughput and CPU of `call` (a Tool's): every outcome checked."""

    async def checked() -> None:
        outcome = await call(ARGUMENTS)
        if outcome.error is not None or outcome.result != "hello, tool":
            raise RuntimeError(f"a call came back wrong: {outcome!r}")

    for _ in range(loads["warm_up"]):
        await checked()
    latencies: list[float] = []
    ours, theirs = cpu_seconds(None), cpu_seconds(server_pid) if server_pid else 0.0
    for _ in range(loads["calls"]):
        started = time.perf_counter()
        await checked()
        latencies.append(time.perf_counter() - started)
    ours, theirs = cpu_seconds(None) - ours, (cpu_seconds(server_pid) - theirs if server_pid else 0.0)
    rates: list[float] = []
    for _ in range(loads["rounds"]):
        started = time.perf_counter()
        await asyncio.gather(*(checked() for _ in range(CONCURRENCY)))
        rates.append(CONCURRENCY / (time.perf_counter() - started))
    latencies.sort()
    return {
        "median_us": statistics.median(latencies) * 1e6,
        "p99_us": latencies[int(len(latencies) * 0.99) - 1] * 1e6,
        "calls_per_s": statistics.median(rates),
        "cpu_us_per_call": ours / loads["calls"] * 1e6,
        "server_cpu_us_per_call": theirs / loads["calls"] * 1e6,
    }


async def run(loads: dict[str, int]) -> dict[str, dict[str, float]]:
    from sentient_assist import tool
    from sentient_assist.llm import MCPServerStdio, MCPServerStreamableHTTP
    from sentient_assist.llm.mcp import MCPToolset

    @tool
    async def echo(text: str) -> str:
        """Say the text back."""
        return text

    results: dict[str, dict[str, float]] = {}
    print("function ...", file=sys.stderr)
    results["function"] = {"open_s": 0.0, **await measure(echo.call, None, loads)}
    http_process, url = start_http_server()
    try:
        targets: list[tuple[str, MCPToolset]] = [
            ("stdio", MCPServerStdio(sys.executable, ["-m", "bench.mcp_tools", "--serve", "stdio"], cwd=ROOT)),
            ("http", MCPServerStreamableHTTP(url)),
        ]
        for name, server in targets:
            print(f"{name} ...", file=sys.stderr)
            try:
                started = time.perf_counter()
                tools = {made.remote_name: made for made in await server.list_tools()}
                opened = time.perf_counter() - started
                pid = (await tools["pid"].call("{}")).result
                results[name] = {"open_s": opened, **await measure(tools["echo"].call, pid, loads)}
            finally:
                await server.aclose()
    finally:
        http_process.terminate()
        http_process.wait(timeout=10)
    return results


def table(results: dict[str, dict[str, float]], markdown: bool) -> str:
    rows = [
        ("open (first use)", "open_s", "{:.2f} s"),
        ("latency, median", "median_us", "{:,.0f} us"),
        ("latency, p99", "p99_us", "{:,.0f} us"),
        (f"{CONCURRENCY} at once", "calls_per_s", "{:,.0f} calls/s"),
        ("CPU per call, this process", "cpu_us_per_call", "{:,.0f} us"),
        ("CPU per call, the server", "server_cpu_us_per_call", "{:,.0f} us"),
    ]
    names = list(results)
    cells = [[label, *(shape.format(results[name][key]) for name in names)] for label, key, shape in rows]
    if markdown:
        lines = ["| | " + " | ".join(names) + " |", "|---|" + "---:|" * len(names)]
        lines += ["| " + " | ".join(row) + " |" for row in cells]
        return "\n".join(lines)
    widths = [max(len(row[i]) for row in [["", *names], *cells]) for i in range(len(names) + 1)]
    lines = ["  ".join(cell.rjust(width) for cell, width in zip(["", *names], widths, strict=True))]
    lines += ["  ".join(cell.rjust(width) for cell, width in zip(row, widths, strict=True)) for row in cells]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small loads: a smoke run")
    parser.add_argument("--markdown", action="store_true", help="also print the table as Markdown")
    parser.add_argument("--out", type=Path, help="write the figures as JSON here")
    parser.add_argument("--serve", choices=["stdio", "http"], help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.serve:
        serve(options.serve, options.port)
        return 0
    loads = QUICK if options.quick else FULL
    try:
        import uvloop
    except ImportError:  # pragma: no cover
        results = asyncio.run(run(loads))
    else:
        results = uvloop.run(run(loads))
    print(table(results, markdown=False))
    if options.markdown:
        print()
        print(table(results, markdown=True))
    if options.out:
        machine = {"python": platform.python_version(), "cpus": os.cpu_count(), "machine": platform.machine()}
        options.out.write_text(json.dumps({"loads": loads, "machine": machine, "results": results}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
