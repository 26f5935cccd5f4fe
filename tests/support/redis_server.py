"""A real redis-server (Debian's package) on a free loopback port, for tests that need Redis.

    with running_redis() as redis:
        redis.url          # "redis://127.0.0.1:PORT/0"
        redis.command("INFO", "clients")
        redis.kill()       # SIGKILL, for the tests of Redis dying mid-run

It keeps nothing on disk (`--save '' --appendonly no`). `redis_server` is a session fixture for
test modules that share one (`from tests.support.redis_server import redis_server` in the
module, or in a conftest); a test that kills Redis starts its own with `running_redis()`.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.support.server import check_port_taken, on_a_free_port

REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"


class RunningRedis:
    def __init__(self, process: subprocess.Popen[bytes], port: int, directory: Path) -> None:
        self.process = process
        self.port = port
        self.directory = directory
        self.url = f"redis://127.0.0.1:{port}/0"

    def command(self, *args: str) -> str:
        """One command over RESP, its reply decoded loosely (a bulk string, an integer, a status)."""
        return _command(self.port, args)

    def info(self, section: str) -> dict[str, str]:
        """`INFO section` as a dict."""
        lines = self.command("INFO", section).splitlines()
        return dict(line.split(":", 1) for line in lines if ":" in line and not line.startswith("#"))

    def connected_clients(self) -> int:
        return int(self.info("clients")["connected_clients"])

    def kill(self) -> None:
        """SIGKILL the server (what dying mid-run looks like to a client)."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    @property
    def alive(self) -> bool:
        return self.process.poll() is None


@contextmanager
def running_redis(port: int | None = None) -> Iterator[RunningRedis]:
    """A redis-server on `port` (by default a free one, and another if it lost that one); yields
    once it answers PING, stops it after. Where there is none, the test is skipped, saying how to
    install it."""
    if shutil.which(REDIS_SERVER) is None:
        pytest.skip("redis-server is not installed (Debian: apt-get install redis-server)")
    with _running_redis(port) if port is not None else on_a_free_port(_running_redis) as server:
        yield server


@contextmanager
def _running_redis(port: int) -> Iterator[RunningRedis]:
    directory = Path(tempfile.mkdtemp(prefix="assist-redis-"))
    command = [
        REDIS_SERVER,
        "--port",
        str(port),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
        "--dir",
        str(directory),
        "--protected-mode",
        "no",
    ]
    log = open(directory / "redis.log", "wb")  # closed in finally, after the process
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    server = RunningRedis(process, port, directory)
    try:
        _wait_until_answering(server)
        yield server
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        log.close()
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RunningRedis]:
    """One redis-server for the session; tests that need it empty call `FLUSHALL` themselves."""
    with running_redis() as server:
        yield server


def _wait_until_answering(server: RunningRedis, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            log = (server.directory / "redis.log").read_text(errors="replace")
            check_port_taken(log)
            raise RuntimeError(f"redis-server exited with {server.process.returncode}:\n{log}")
        try:
            if server.command("PING") == "PONG":
                return
        except OSError:
            pass
        time.sleep(0.02)
    raise RuntimeError(f"redis-server not answering after {timeout}s")


def _command(port: int, args: tuple[str, ...]) -> str:
    """A RESP request and its reply, without a client library (the helper must not need `redis`)."""
    request = f"*{len(args)}\r\n".encode() + b"".join(
        f"${len(arg.encode())}\r\n".encode() + arg.encode() + b"\r\n" for arg in args
    )
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(request)
        reader = sock.makefile("rb")
        return _read_reply(reader)


def _read_reply(reader: object) -> str:
    readline = reader.readline  # type: ignore[attr-defined]
    read = reader.read  # type: ignore[attr-defined]
    line: bytes = readline()
    if not line:
        raise ConnectionError("redis closed the connection")
    kind, rest = line[:1], line[1:].rstrip(b"\r\n")
    if kind in (b"+", b":"):
        return rest.decode()
    if kind == b"-":
        raise RuntimeError(rest.decode())
    if kind == b"$":
        length = int(rest)
        if length < 0:
            return ""
        data: bytes = read(length + 2)
        return data[:-2].decode(errors="replace")
    if kind == b"*":
        count = int(rest)
        return "\n".join(_read_reply(reader) for _ in range(max(count, 0)))
    raise RuntimeError(f"unexpected RESP reply {line!r}")
