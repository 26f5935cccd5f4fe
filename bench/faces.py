"""What each face costs per event, against /assist, in one run on one server.

    python -m bench.faces               # the full run: about a minute on 2 cores
    python -m bench.faces --quick       # a smoke run: small loads
    python -m bench.faces --markdown    # also the table as Markdown (bench/README.md's)

One server (`python -m app serve`, serving bench.agent:BenchAgent, as bench/run.py's "ours")
answers every face; the same agent run (`stream:N`: N chunks of 16 characters, then the stream's
end and done) is asked for through each. The rounds take the faces in turn, so that each sees
the same machine. Per face:

    events/s     the agent's events (N + 2 a run) delivered per second, C runs at once, the
                 median round
    CPU/event    the server's CPU time (/proc schedstat) over the rounds, per agent event
    bytes/event  what the face writes per agent event

FACES is the table of faces: a face is its path, the body that asks for a prompt, and the
bytes its answer ends with. Another face joins by adding a row.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench import client
from bench.servers import HOST, Server

FULL = {"chunks": 2000, "concurrency": 20, "rounds": 9}
QUICK = {"chunks": 200, "concurrency": 5, "rounds": 2}


@dataclass(frozen=True)
class Face:
    path: str
    body: Callable[[str], bytes]  # the request's body, asking for the prompt
    ends_with: bytes  # the last event of a whole answer, as its frame ends


def _assist_body(prompt: str) -> bytes:
    return client.request_body(prompt)


def _agui_body(prompt: str) -> bytes:
    message = {"id": "m1", "role": "user", "content": prompt}
    return json.dumps({"threadId": "bench", "runId": client.new_ulid(), "messages": [message]}).encode()


def _a2a_body(prompt: str) -> bytes:
    # A2A 0.3's `message/stream`: 1.0's SendStreamingMessage needs an A2A-Version header, which
    # this client does not send; both reach the same handler (the SDK's compatibility layer).
    message = {
        "kind": "message",
        "messageId": client.new_ulid(),
        "role": "user",
        "parts": [{"kind": "text", "text": prompt}],
    }
    return json.dumps({"jsonrpc": "2.0", "id": 1, "method": "message/stream", "params": {"message": message}}).encode()


FACES: dict[str, Face] = {
    "assist": Face("/assist", _assist_body, b'"atomic.done","event_name":"done"'),
    "agui": Face("/agui", _agui_body, b'"type":"RUN_FINISHED"'),
    "a2a": Face("/a2a", _a2a_body, b'"final":true,"kind":"status-update","status":{"state":"completed"'),
}


async def ask(port: int, face: Face, prompt: str, timeout: float = 60.0) -> bytes:
    """One whole answer of `face` (HTTP/1.1, the connection closed after it), its body's bytes
    with the chunked framing left in; checked to end as a whole answer does."""
    body = face.body(prompt)
    head = (
        f"POST {face.path} HTTP/1.1\r\nHost: {HOST}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode()
    reader, writer = await asyncio.open_connection(HOST, port)
    try:
        writer.write(head + body)
        received = await asyncio.wait_for(reader.read(-1), timeout)
    finally:
        writer.close()
    if not received.startswith(b"HTTP/1.1 200") or face.ends_with not in received[-4096:]:
        raise RuntimeError(f"{face.path}: not a whole answer: {received[:200]!r} ... {received[-200:]!r}")
    return received


async def measure(server: Server, loads: dict[str, int]) -> dict[str, dict[str, float]]:
    chunks, concurrency, rounds = loads["chunks"], loads["concurrency"], loads["rounds"]
    prompt = f"stream:{chunks}"
    events = chunks + 2  # the agent's: its chunks, the stream's end, done
    rates: dict[str, list[float]] = {name: [] for name in FACES}
    cpu: dict[str, float] = dict.fromkeys(FACES, 0.0)
    sizes: dict[str, int] = {}
    for name, face in FACES.items():  # warm up: each face's first requests import and build what it needs
        sizes[name] = len(await ask(server.port, face, prompt))
    for _ in range(rounds):
        for name, face in FACES.items():
            cpu_before, started = server.cpu_seconds(), time.perf_counter()
            await asyncio.gather(*(ask(server.port, face, prompt) for _ in range(concurrency)))
            elapsed = time.perf_counter() - started
            cpu[name] += server.cpu_seconds() - cpu_before
            rates[name].append(concurrency * events / elapsed)
    total = rounds * concurrency * events
    return {
        name: {
            "events_per_second": statistics.median(rates[name]),
            "cpu_us_per_event": cpu[name] / total * 1e6,
            "bytes_per_event": sizes[name] / events,
        }
        for name in FACES
    }


def table(results: dict[str, dict[str, float]], markdown: bool) -> str:
    base = results["assist"]
    rows = [("face", "events/s", "vs /assist", "CPU/event", "bytes/event")]
    for name, figures in results.items():
        rows.append(
            (
                "/" + name,
                f"{figures['events_per_second']:,.0f}",
                f"{figures['events_per_second'] / base['events_per_second']:.2f}x",
                f"{figures['cpu_us_per_event']:.1f} us",
                f"{figures['bytes_per_event']:.0f}",
            )
        )
    if markdown:
        lines = ["| " + " | ".join(rows[0]) + " |", "|---|" + "---:|" * (len(rows[0]) - 1)]
        lines += ["| " + " | ".join(row) + " |" for row in rows[1:]]
        return "\n".join(lines)
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.rjust(width) for cell, width in zip(row, widths, strict=True)) for row in rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small loads: a smoke run")
    parser.add_argument("--markdown", action="store_true", help="also print the table as Markdown")
    parser.add_argument("--out", type=Path, help="write the figures as JSON here")
    options = parser.parse_args()
    loads = QUICK if options.quick else FULL
    log = Path(tempfile.gettempdir()) / "bench-faces-server.log"
    server = Server(
        key="ours",
        label="ours",
        command=[sys.executable, "-m", "app", "serve"],
        env={"ASSIST_AGENT": "bench.agent:BenchAgent", "ASSIST_LOG_LEVEL": "warning"},
        log_path=log,
    )
    server.start()
    try:
        with asyncio.Runner(loop_factory=client.loop_factory()) as runner:  # uvloop, as the server runs
            runner.run(server.wait_ready())
            print(f"{len(FACES)} faces, {loads}; server log {log}", file=sys.stderr)
            results = runner.run(measure(server, loads))
    finally:
        server.stop()
    print(table(results, markdown=False))
    if options.markdown:
        print()
        print(table(results, markdown=True))
    if options.out:
        machine = {"python": platform.python_version(), "machine": platform.machine()}
        options.out.write_text(json.dumps({"loads": loads, "machine": machine, "results": results}, indent=2))


if __name__ == "__main__":
    main()
