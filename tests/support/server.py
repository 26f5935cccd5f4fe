"""The real service under a real uvicorn, for a test: `python -m app serve` (or any command that
takes `--fd`) on a loopback socket bound here and handed to the child, never a port found free and
let go, which another process may take first. Programs that cannot take a socket (redis-server,
nginx, llama.cpp's server, an MCP server) get a port, and are started again on another one when
they lost theirs (`on_a_free_port`).

Tests share servers through the `serve` fixture (tests/conftest.py): `serve(env)` is one process
per set of settings for the whole session. A test that stops, signals or breaks its server starts
its own with `running_server(env)`.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from pathlib import Path
from typing import Any, TypeVar

import httpx
import uvicorn

from sentient_assist.server.protocol import BoundedHttpToolsProtocol
from tests.support.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
HOST = "127.0.0.1"
# Every face, for the tests that reach /mcp, /agui or /a2a (ASSIST_FACES names the faces served).
ALL_FACES = {"ASSIST_FACES": "assist,openai,playground,mcp,agui,a2a"}
SERVE = [sys.executable, "-m", "app", "serve"]
# What a program that lost its port to another process prints (uvicorn, redis-server, nginx).
_PORT_TAKEN = "address already in use"
T = TypeVar("T")


def listening_socket() -> socket.socket:
    """A loopback socket listening on a port the kernel chose: held from the start, so nobody else
    can take the port before the server does."""
    sock = socket.socket()
    # uvicorn takes a socket from `--fd` as a Unix one (socket.fromfd(fd, AF_UNIX, ...)), so neither
    # uvloop nor asyncio sets TCP_NODELAY on what it accepts, as they do on a port of uvicorn's own:
    # set on the listening socket, every accepted connection inherits it (Linux), as served for real.
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind((HOST, 0))
    sock.listen(2048)  # uvicorn's own backlog
    return sock


def free_port() -> int:
    """A port nobody listens on now: for a program that cannot take a socket (start it with
    `on_a_free_port`), or for an address where nothing answers."""
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
        return port


class PortTaken(RuntimeError):
    """The program exited because another process took its port first."""


def check_port_taken(log: str) -> None:
    """Raise PortTaken when a program's output says its port was taken (then try another)."""
    if _PORT_TAKEN in log.lower():
        raise PortTaken(log[-2000:])


@contextmanager
def on_a_free_port(start: Callable[[int], AbstractContextManager[T]], attempts: int = 5) -> Iterator[T]:
    """`start(port)` on a free port, and on another when the program lost that one (PortTaken)."""
    for _ in range(attempts):
        with ExitStack() as stack:
            try:
                started = stack.enter_context(start(free_port()))
            except PortTaken:
                continue
            yield started
            return
    raise RuntimeError(f"no free port kept after {attempts} attempts")


class RunningServer:
    def __init__(self, process: subprocess.Popen[bytes], url: str, log_path: Path) -> None:
        self.process = process
        self.url = url
        self.log_path = log_path

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])

    @property
    def address(self) -> tuple[str, int]:
        return HOST, self.port

    def log(self, since: int = 0) -> str:
        """What the server printed (from character `since`: a mark taken with `len(server.log())`)."""
        return self.log_path.read_text(errors="replace")[since:]

    def metric(self, name: str) -> float:
        """The value of the first sample of /metrics whose line starts with `name` (0 when none)."""
        for line in httpx.get(self.url + "/metrics", timeout=10).text.splitlines():
            if line.startswith(name) and not line.startswith("#"):
                return float(line.rsplit(" ", 1)[1])
        return 0.0

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def connections(self) -> list[int]:
        """The server's open TCP connections (established, or closed by the client and not yet by
        the server), each as the bytes it has yet to send (its send queue): /proc/net/tcp."""
        return [queued for state, queued in _tcp_on_port(self.port) if state in _OPEN]

    def wait_until_quiet(self, timeout: float = 10) -> None:
        """Until the server holds no connection (the start-up probe's, an earlier test's)."""
        assert wait_until(lambda: not self.connections(), timeout), f"still connected: {self.connections()}"


# /proc/net/tcp's states of a connection that the server still holds open: ESTABLISHED, SYN_RECV, CLOSE_WAIT.
_OPEN = {"01", "03", "08"}


def _tcp_on_port(port: int) -> list[tuple[str, int]]:
    """(state, send queue) of each IPv4 socket whose local port is `port`."""
    found = []
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, state, queues = fields[1], fields[3], fields[4]
        if int(local.rsplit(":", 1)[1], 16) == port:
            found.append((state, int(queues.split(":")[0], 16)))
    return found


@contextmanager
def running_server(
    env: dict[str, str] | None = None,
    args: list[str] | None = None,
    *,
    command: list[str] = SERVE,
    cwd: Path = ROOT,
    listener: socket.socket | None = None,
    keep_listener: bool = False,
) -> Iterator[RunningServer]:
    """`python -m app serve` (or `command`, any that takes `--fd`) on a socket bound here (or
    `listener`, bound by the test to know its port first); yields once /healthz answers, stops
    it after. With `keep_listener` the test keeps its socket, to start another server on the
    same port; else only the server holds it: once it exits, connecting is refused."""
    sock = listener if listener is not None else listening_socket()
    full = [*command, *(args or []), "--fd", str(sock.fileno())]
    url = f"http://{HOST}:{sock.getsockname()[1]}"
    with _running(full, url, env, cwd, handed=sock, keep=keep_listener) as server:
        yield server


@contextmanager
def running_command(
    command: Callable[[int], list[str]], env: dict[str, str] | None = None, cwd: Path = ROOT
) -> Iterator[RunningServer]:
    """A command that listens on the port it is given (`command(port)`) and serves /healthz: on a
    free port, and on another if it lost that one. Yields once /healthz answers."""

    def start(port: int) -> AbstractContextManager[RunningServer]:
        return _running(command(port), f"http://{HOST}:{port}", env, cwd, port_may_be_taken=True)

    with on_a_free_port(start) as server:
        yield server


@contextmanager
def _running(
    command: list[str],
    url: str,
    env: dict[str, str] | None,
    cwd: Path,
    handed: socket.socket | None = None,
    keep: bool = False,
    port_may_be_taken: bool = False,
) -> Iterator[RunningServer]:
    """`command` with its output in a file; `handed`, a listening socket, is the child's to serve
    on (and only the child's, unless `keep`: then connecting to a stopped server is queued, not
    refused, until the test starts another on it or closes it)."""
    log_file = tempfile.NamedTemporaryFile(prefix="assist-server-", suffix=".log", delete=False)
    fds = () if handed is None else (handed.fileno(),)
    try:
        process = subprocess.Popen(
            command, cwd=cwd, env=clean_env(env), stdout=log_file, stderr=subprocess.STDOUT, pass_fds=fds
        )
    finally:
        if handed is not None and not keep:
            handed.close()
    server = RunningServer(process, url, Path(log_file.name))
    try:
        _wait_until_healthy(server, port_may_be_taken)
        yield server
    finally:
        stop(process)
        log_file.close()
        os.unlink(log_file.name)


def stop(process: subprocess.Popen[bytes], timeout: float = 10) -> None:
    """SIGTERM, then SIGKILL after `timeout` seconds; reaped either way."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def clean_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """This process's environment without ASSIST_* settings, plus `env`."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("ASSIST_")}
    clean.update(env or {})
    return clean


def _wait_until_healthy(server: RunningServer, port_may_be_taken: bool, timeout: float = 30.0) -> None:
    # On a socket bound beforehand a request waits in its backlog until uvicorn takes it: one
    # request answers as soon as the server can. On a port of its own, the port may not be
    # listened on yet: connecting is refused until then.
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            if port_may_be_taken:
                check_port_taken(server.log())
            raise RuntimeError(f"server exited with {server.process.returncode}:\n{server.log()}")
        try:
            if httpx.get(server.url + "/healthz", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            time.sleep(0.05)  # refused: not listening yet (or gone; the next look tells)
    raise RuntimeError(f"server not healthy after {timeout}s:\n{server.log()}")


class Servers:
    """The service per set of settings, started at first use and shared till the session ends
    (the `serve` fixture): `serve(env, args)` gives the one running with exactly those (and
    `command`, another that takes `--fd`: uvicorn's own, say)."""

    def __init__(self) -> None:
        self._stack = ExitStack()
        self._running: dict[tuple[tuple[tuple[str, str], ...], tuple[str, ...]], RunningServer] = {}

    def __call__(
        self, env: dict[str, str] | None = None, args: list[str] | None = None, *, command: list[str] = SERVE
    ) -> RunningServer:
        key = (tuple(sorted((env or {}).items())), (*command, *(args or ())))
        server = self._running.get(key)
        if server is None or not server.alive:  # a test that broke a shared server gets another
            server = self._stack.enter_context(running_server(env, args, command=command))
            self._running[key] = server
        return server

    def close(self) -> None:
        self._stack.close()


@contextmanager
def uvicorn_in_thread(app: Any, **config: Any) -> Iterator[tuple[uvicorn.Server, tuple[str, int]]]:
    """`app` under a real uvicorn with the service's protocol, in a thread of this process, on a
    loopback socket bound here: for tests that read the server's state or the app's own objects.
    Yields the server and its address; stops it after."""
    listener = listening_socket()
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
