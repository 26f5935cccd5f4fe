"""Start the real service (`python -m app serve`, uvicorn) on a free loopback port."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from sentient_assist.server.protocol import BoundedHttpToolsProtocol
from tests.support.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class RunningServer:
    def __init__(self, process: subprocess.Popen, url: str, log_path: Path) -> None:
        self.process = process
        self.url = url
        self.log_path = log_path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


@contextmanager
def running_server(env: dict[str, str] | None = None, args: list[str] | None = None) -> Iterator[RunningServer]:
    """`python -m app serve` on a free port, as the README starts it."""
    port = free_port()
    command = [sys.executable, "-m", "app", "serve", "--port", str(port), *(args or [])]
    with running_command(command, port, env) as server:
        yield server


@contextmanager
def uvicorn_in_thread(app: Any, **config: Any) -> Iterator[tuple[uvicorn.Server, tuple[str, int]]]:
    """`app` under a real uvicorn with the service's protocol, in a thread of this process, on a
    free loopback port: for tests that read the server's state or the app's own objects. Yields
    the server and its address; stops it after."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    options: dict[str, Any] = {"http": BoundedHttpToolsProtocol, "lifespan": "off", "log_config": None, **config}
    server = uvicorn.Server(uvicorn.Config(app, **options))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    try:
        if not wait_until(lambda: server.started, 10):
            raise RuntimeError("uvicorn did not start within 10 s")
        yield server, listener.getsockname()
    finally:
        server.should_exit = True
        thread.join(10)
        listener.close()


@contextmanager
def running_command(
    command: list[str], port: int, env: dict[str, str] | None = None, cwd: Path = ROOT
) -> Iterator[RunningServer]:
    """Any command that serves on `port`, run in `cwd`; yields once /healthz answers, stops it after."""
    log_file = tempfile.NamedTemporaryFile(prefix="assist-server-", suffix=".log", delete=False)
    process = subprocess.Popen(command, cwd=cwd, env=clean_env(env), stdout=log_file, stderr=subprocess.STDOUT)
    server = RunningServer(process, f"http://127.0.0.1:{port}", Path(log_file.name))
    try:
        _wait_until_healthy(server)
        yield server
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log_file.close()
        os.unlink(log_file.name)


def clean_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """This process's environment without ASSIST_* settings, plus `env`."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("ASSIST_")}
    clean.update(env or {})
    return clean


def _wait_until_healthy(server: RunningServer, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(f"server exited with {server.process.returncode}:\n{server.log()}")
        try:
            if httpx.get(server.url + "/healthz", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"server not healthy after {timeout}s:\n{server.log()}")
