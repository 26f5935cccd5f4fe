"""One hostile connection cannot take the service down or starve others: each attack against a
real uvicorn on loopback, bounded in bytes and time, with the figure it guards asserted loosely."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.server import RunningServer, free_port, running_command, running_server
from tests.support.sse import new_body, read_stream

SCRIPTED = "tests.support.agents:ScriptedAgent"


def rss_mb(server: RunningServer) -> float:
    for line in Path(f"/proc/{server.process.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def connect(server: RunningServer) -> socket.socket:
    host, port = server.url.removeprefix("http://").split(":")
    return socket.create_connection((host, int(port)), timeout=10)


def request_head(body_length: int) -> bytes:
    return (
        b"POST /assist HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"
        b"Content-Length: " + str(body_length).encode() + b"\r\n\r\n"
    )


def status_of(sock: socket.socket) -> int:
    """The status of the answer on `sock`, or 0 when it was closed without one."""
    try:
        head = sock.recv(64)
    except OSError:
        return 0
    return int(head.split(b" ", 2)[1]) if head.startswith(b"HTTP/1.1 ") else 0


def streams_open(server: RunningServer) -> float:
    text = httpx.get(server.url + "/metrics").text
    return float(next(line for line in text.splitlines() if line.startswith("assist_streams_open")).split()[1])


@pytest.fixture(scope="module")
def guarded() -> Iterator[RunningServer]:
    env = {
        "ASSIST_AGENT": SCRIPTED,
        "ASSIST_MAX_STREAMS": "2",
        "ASSIST_HEADER_TIMEOUT": "1",
        "ASSIST_BODY_TIMEOUT": "1",
        "ASSIST_REQUEST_TIMEOUT": "2",
        "ASSIST_LOG_LEVEL": "warning",
    }
    with running_server(env) as server:
        yield server


def test_headers_without_end_are_cut_at_the_limit_and_memory_stays_flat(guarded):
    before = rss_mb(guarded)
    sock = connect(guarded)
    sock.sendall(b"POST /assist HTTP/1.1\r\nHost: test\r\n")
    sent, line = 0, b"X-Junk: " + b"a" * 8000 + b"\r\n"
    try:
        while sent < 50_000_000:
            sock.sendall(line)
            sent += len(line)
    except OSError:
        pass  # cut off: the server closed the connection
    # What the kernels' socket buffers took before the reset came back; the server stopped at 64 KiB.
    assert sent < 10_000_000, f"{sent} bytes of headers were taken"
    assert status_of(sock) in (431, 0)
    sock.close()
    assert rss_mb(guarded) - before < 20
    assert read_stream(guarded.url, new_body("session")).status == 200


def test_header_blocks_that_trickle_are_answered_408_and_closed(guarded):
    sockets = [connect(guarded) for _ in range(50)]
    started = time.monotonic()
    for sock in sockets:
        sock.sendall(b"POST /assist HTTP/1.1\r\n")
    for _ in range(3):  # a header line every half second, never the end of the block
        time.sleep(0.5)
        for sock in sockets:
            try:
                sock.sendall(b"X-Slow: 1\r\n")
            except OSError:
                pass
    statuses = [status_of(sock) for sock in sockets]
    assert time.monotonic() - started < 5
    assert set(statuses) <= {408, 0} and statuses.count(408) >= 45, statuses
    for sock in sockets:
        sock.close()
    # A connection that sends nothing at all is closed too.
    idle = connect(guarded)
    assert status_of(idle) in (408, 0)
    idle.close()


def test_bodies_that_never_arrive_free_their_places_at_the_body_deadline(guarded):
    stalled = [connect(guarded) for _ in range(2)]
    for sock in stalled:
        sock.sendall(request_head(100))  # and then nothing
    time.sleep(0.3)
    assert httpx.post(guarded.url + "/assist", json=new_body("session")).status_code == 503  # both places taken
    assert [status_of(sock) for sock in stalled] == [408, 408]  # within ASSIST_BODY_TIMEOUT
    for sock in stalled:
        sock.close()
    assert read_stream(guarded.url, new_body("session")).status == 200


def test_a_client_that_stops_reading_is_cut_off_at_the_time_limit(guarded):
    body = json.dumps(new_body("fast:2000000")).encode()
    sock = connect(guarded)
    sock.sendall(request_head(len(body)) + body)
    time.sleep(0.5)
    assert streams_open(guarded) == 1
    deadline = time.monotonic() + 6  # the time limit is 2 s, the cut-off one second after it
    while streams_open(guarded) != 0 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert streams_open(guarded) == 0, "the stream still holds its place"
    sock.settimeout(5)
    received = 0
    while chunk := sock.recv(1 << 20):  # what the kernel held, then the end: the connection is closed
        received += len(chunk)
    assert received < 20_000_000  # what the socket buffers held: the stream itself was 2,000,000 events
    sock.close()


def test_sigterm_while_a_body_arrives_answers_503_without_a_traceback():
    with running_server({"ASSIST_SHUTDOWN_GRACE": "1"}) as server:
        sock = connect(server)
        sock.sendall(request_head(100) + b'{"query":')
        time.sleep(0.3)
        server.process.send_signal(signal.SIGTERM)
        assert status_of(sock) == 503
        sock.close()
        assert server.process.wait(timeout=10) in (0, -signal.SIGTERM)
        assert "Traceback" not in server.log()


def test_default_server_has_the_same_limits_logs_and_backstop(tmp_path):
    port = free_port()
    script = tmp_path / "serve_it.py"
    script.write_text(
        textwrap.dedent(f"""
        import asyncio
        from sentient_assist import AbstractAgent, DefaultServer

        class Hangs(AbstractAgent):
            name = "hangs"

            async def assist(self, session, query, response_handler):
                stream = response_handler.create_text_stream("FINAL_RESPONSE")
                await stream.emit_chunk("waiting ")
                await asyncio.sleep(3600)

        DefaultServer(Hangs()).run(host="127.0.0.1", port={port})
    """)
    )
    env = {"ASSIST_SHUTDOWN_GRACE": "1", "ASSIST_HEADER_TIMEOUT": "1", "ASSIST_LOG_LEVEL": "info"}
    with running_command([sys.executable, str(script)], port, env) as server:
        assert httpx.get(server.url + "/healthz?api_key=do-not-log-me").status_code == 200
        huge = connect(server)
        try:
            huge.sendall(b"GET /healthz HTTP/1.1\r\nX-Junk: " + b"a" * 200_000 + b"\r\n\r\n")
        except OSError:
            pass
        assert status_of(huge) in (431, 0)
        huge.close()
        with httpx.Client(timeout=10) as client:
            with client.stream("POST", server.url + "/assist", json=new_body("hang")) as response:
                lines = response.iter_lines()
                next(lines)
                signalled = time.monotonic()
                server.process.send_signal(signal.SIGTERM)
                names = [line for line in lines if line.startswith("event: ")]
        assert names[-2:] == ["event: error", "event: done"]  # the grace, then 503 and done
        assert server.process.wait(timeout=15) in (0, -signal.SIGTERM)
        assert time.monotonic() - signalled < 8
        log = server.log()
    assert "do-not-log-me" not in log
    assert "path=/healthz" in log  # the service's own access log, without the query string


def test_the_header_limits_are_settings(tmp_path):
    env = {**os.environ, "ASSIST_MAX_HEADER_BYTES": "12"}
    result = subprocess.run(
        [sys.executable, "-m", "app", "serve", "--port", "1"], env=env, capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 2 and "ASSIST_MAX_HEADER_BYTES" in result.stderr
