"""How soon the service reacts, where the tests only check that it does (issue 39: no timing
assertion in a test). Each against a real `python -m app serve` on loopback:

    cancel       a client leaves a stream whose agent never ends: seconds from the client's close
                 to the agent's cancellation (the agent writes the time it was cancelled)
    time limit   an agent that never ends, ASSIST_REQUEST_TIMEOUT=1: seconds past the limit when
                 the 504 and done arrive
    bad body     tests/server/test_hostile_bodies.py's 1 MB bodies of bad items: seconds to their
                 422, and the slowest /healthz answered meanwhile
    shutdown     20 streams whose clients read nothing, ASSIST_SHUTDOWN_GRACE=1: seconds from
                 SIGTERM to the process's exit (the grace, the cut-off, uvicorn's own backstop)

    python -m bench.reactions            # about half a minute
    python -m bench.reactions --rounds 3

It prints a Markdown table (median and worst of the rounds). Nothing here runs in CI.
"""

from __future__ import annotations

import argparse
import json
import signal
import socket
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from tests.server.test_hostile_bodies import HOSTILE
from tests.support.server import running_server
from tests.support.sse import iter_events, new_body

SCRIPTED = {"ASSIST_AGENT": "tests.support.agents:ScriptedAgent", "ASSIST_LOG_LEVEL": "warning"}
FLOOD = {"ASSIST_AGENT": "tests.server.hostile_agents:Flood", "ASSIST_LOG_LEVEL": "warning"}


def cancel_after_leaving(url: str, folder: Path, rounds: int) -> list[float]:
    seconds = []
    for index in range(rounds):
        marker = folder / f"cancelled-{index}"
        with (
            httpx.Client(timeout=10) as client,
            client.stream("POST", url + "/assist", json=new_body(f"hang:{marker}")) as r,
        ):
            events = iter_events(r)
            next(events)
            left = time.time()
            del events  # dropped, it closes the response: the client leaves
        deadline = time.monotonic() + 10
        while not (marker.exists() and marker.read_text()) and time.monotonic() < deadline:
            time.sleep(0.001)
        seconds.append(float(marker.read_text()) - left)
    return seconds


def past_the_time_limit(url: str, folder: Path, rounds: int, limit: float) -> list[float]:
    seconds = []
    for index in range(rounds):
        started = time.monotonic()
        with httpx.Client(timeout=30) as client:
            text = client.post(url + "/assist", json=new_body(f"hang:{folder / f'limit-{index}'}")).text
        assert '"error_code":504' in text, text[-300:]
        seconds.append(time.monotonic() - started - limit)
    return seconds


def bad_bodies(url: str, rounds: int) -> tuple[list[float], list[float]]:
    answers: list[float] = []
    health: list[float] = []
    stop = threading.Event()

    def probe() -> None:
        with httpx.Client(timeout=10) as client:
            while not stop.is_set():
                started = time.monotonic()
                client.get(url + "/healthz")
                health.append(time.monotonic() - started)
                time.sleep(0.01)  # the probe's pace

    prober = threading.Thread(target=probe, daemon=True)
    prober.start()
    with httpx.Client(timeout=30) as client:
        for _ in range(rounds):
            for body in HOSTILE.values():
                started = time.monotonic()
                status = client.post(url + "/assist", content=body, headers={"Content-Type": "application/json"})
                answers.append(time.monotonic() - started)
                assert status.status_code == 422, status.text[:300]
    stop.set()
    prober.join(15)
    return answers, health


def shutdown_with_non_readers(rounds: int) -> list[float]:
    body = json.dumps(new_body("1000000")).encode()
    head = (
        "POST /assist HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    seconds = []
    for _ in range(rounds):
        with running_server({**FLOOD, "ASSIST_SHUTDOWN_GRACE": "1"}) as server:
            clients = []
            for _ in range(20):
                sock = socket.socket()
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                sock.connect(server.address)
                sock.sendall(head.encode() + body)
                clients.append(sock)
            deadline = time.monotonic() + 10
            while sum(queued > 0 for queued in server.connections()) < 20 and time.monotonic() < deadline:
                time.sleep(0.01)  # until every writer is blocked
            signalled = time.monotonic()
            server.process.send_signal(signal.SIGTERM)
            server.process.wait(timeout=30)
            seconds.append(time.monotonic() - signalled)
            for sock in clients:
                sock.close()
    return seconds


def row(name: str, values: list[float], unit: Callable[[float], str]) -> str:
    return f"| {name} | {unit(statistics.median(values))} | {unit(max(values))} | {len(values)} |"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5, help="rounds of each measure (default 5)")
    options = parser.parse_args(argv)
    ms = lambda seconds: f"{seconds * 1000:.1f} ms"  # noqa: E731
    s = lambda seconds: f"{seconds:.2f} s"  # noqa: E731
    lines = ["| reaction | median | worst | samples |", "|---|---|---|---|"]
    with tempfile.TemporaryDirectory(prefix="bench-reactions-") as folder:
        with running_server({**SCRIPTED, "ASSIST_REQUEST_TIMEOUT": "1"}) as server:
            lines.append(
                row(
                    "agent cancelled after its client left",
                    cancel_after_leaving(server.url, Path(folder), options.rounds),
                    ms,
                )
            )
            limit = past_the_time_limit(server.url, Path(folder), options.rounds, 1.0)
            lines.append(row("504 past ASSIST_REQUEST_TIMEOUT", limit, ms))
            answers, health = bad_bodies(server.url, options.rounds)
            lines.append(row("422 to a 1 MB body of bad items", answers, ms))
            lines.append(row("/healthz meanwhile", health, ms))
    lines.append(row("exit after SIGTERM, 20 non-readers, grace 1 s", shutdown_with_non_readers(options.rounds), s))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
