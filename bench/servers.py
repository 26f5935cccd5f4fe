"""The three servers under test: how each is started, watched and stopped.

    ours       python -m app serve, serving bench.agent:BenchAgent
    reference  the 0.3.0 package's DefaultServer serving the same agent, from a
               throwaway virtual environment (its pins clash with ours)
    bare       bench/bare_server.py: pre-serialized frames, no framework

Each runs in its own process group (so that stopping it stops all of it), on a
free loopback port, with its output in a log file. All of them run uvicorn with
uvloop and httptools.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from bench import client

ROOT = Path(__file__).resolve().parent.parent
HOST = "127.0.0.1"
REFERENCE_VENV = Path(os.environ.get("BENCH_REFERENCE_VENV", "/tmp/bench-reference-venv"))
REFERENCE_REQUIREMENTS = ["sentient-agent-framework==0.3.0", "uvicorn[standard]==0.34.0"]
# What each environment reports about its stack (run with that environment's python).
_VERSIONS_SCRIPT = """
import json, importlib.metadata as m
names = ["uvicorn", "uvloop", "httptools", "fastapi", "starlette", "pydantic", "sse-starlette",
         "sentient-agent-framework"]
out = {}
for name in names:
    try:
        out[name] = m.version(name)
    except m.PackageNotFoundError:
        pass
import uvloop, httptools  # both servers must run on uvloop + httptools
print(json.dumps(out))
"""


def free_port() -> int:
    """A port nobody listens on now. A server told to listen on it may find it taken by then: it
    exits saying so (`port_taken`), and is started again on another (Server.wait_ready)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        port: int = s.getsockname()[1]
        return port


def port_taken(log: str) -> bool:
    """Whether a server's output says another process took its port (uvicorn, redis-server, nginx)."""
    return "address already in use" in log.lower()


def stack_versions(python: str) -> dict[str, str]:
    """Package versions of the environment of `python`; fails unless uvloop and httptools import there."""
    out = subprocess.run([python, "-c", _VERSIONS_SCRIPT], capture_output=True, text=True, timeout=60, cwd="/")
    if out.returncode != 0:
        raise RuntimeError(f"{python}: uvloop/httptools missing or broken:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout)


def ensure_reference_venv(path: Path = REFERENCE_VENV, log=print) -> str:
    """The python of a virtual environment with sentient-agent-framework 0.3.0; created once, then reused."""
    python = path / "bin" / "python"
    if python.exists():
        try:
            versions = stack_versions(str(python))
        except (RuntimeError, subprocess.SubprocessError, ValueError):
            versions = {}
        if versions.get("sentient-agent-framework") == "0.3.0" and versions.get("uvicorn") == "0.34.0":
            return str(python)
    log(f"creating the reference environment in {path} (pip install {' '.join(REFERENCE_REQUIREMENTS)})")
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(path)], check=True, timeout=300)
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", *REFERENCE_REQUIREMENTS],
        check=True,
        timeout=600,
    )
    stack_versions(str(python))
    return str(python)


@contextmanager
def worktree(rev: str, path: Path) -> Iterator[Path]:
    """REV checked out at `path` (a temporary git worktree of this repository), removed after: another
    build to serve beside this tree, with the same interpreter and packages (its tree first on
    PYTHONPATH, its folder the server's `cwd`)."""
    subprocess.run(["git", "worktree", "add", "-q", "--detach", str(path), rev], cwd=ROOT, check=True)
    try:
        yield path
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(path)], cwd=ROOT, check=False)


async def beside_baseline(
    env: dict[str, str],
    baseline: str | None,
    repeats: int,
    measure: Callable[[Server], Awaitable[dict]],
    prefix: str = "bench-",
) -> dict[str, dict[str, list]]:
    """`python -m app serve` of this tree with `env` ("this tree"), and of `baseline` beside it
    when given (a temporary worktree, the same interpreter), both started before either is
    measured; `repeats` rounds of `measure(server)`, each round starting with the next server:
    {label: {load: [the figures of each round]}}. Every server is stopped, and the worktree
    removed, on failure too."""
    log_dir = Path(tempfile.mkdtemp(prefix=prefix))
    command = [sys.executable, "-m", "app", "serve", "--host", HOST]
    servers = [Server("ours", "this tree", command, env, log_dir / "ours.log")]
    builds: dict[str, dict[str, list]] = {}
    with contextlib.ExitStack() as stack:
        stack.callback(shutil.rmtree, log_dir, ignore_errors=True)
        if baseline:
            tree = stack.enter_context(worktree(baseline, log_dir / "baseline"))
            baseline_env = {**env, "PYTHONPATH": str(tree)}
            servers.append(Server("baseline", baseline, command, baseline_env, log_dir / "baseline.log", cwd=tree))
        for server in servers:
            server.start()
            stack.callback(server.stop)  # before the worktree is removed: callbacks run last in, first out
        for server in servers:
            await server.wait_ready()
        for rep in range(repeats):
            for server in servers[rep % len(servers) :] + servers[: rep % len(servers)]:
                for load, figures in (await measure(server)).items():
                    builds.setdefault(server.label, {}).setdefault(load, []).append(figures)
    return {server.label: builds.get(server.label, {}) for server in servers}


@dataclass
class Server:
    key: str  # ours, reference, bare
    label: str  # the column heading
    command: list[str]
    env: dict[str, str]
    log_path: Path
    port: int = field(default_factory=free_port)
    process: subprocess.Popen | None = None
    cwd: Path = ROOT  # another build's tree (a git worktree) serves from its own folder

    @property
    def pid(self) -> int:
        if self.process is None:
            raise RuntimeError(f"the {self.label} server is not running")
        return self.process.pid

    def start(self, append: bool = False) -> None:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        env.update(self.env)
        self._log = open(self.log_path, "ab" if append else "wb")
        self.process = subprocess.Popen(
            [*self.command, "--port", str(self.port)],
            cwd=self.cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: stop() ends all of it
        )

    def restart(self) -> None:
        """Stop, then start afresh on a new port (its log file is appended to)."""
        self.stop()
        self.port = free_port()
        self.start(append=True)

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    async def wait_ready(self, timeout: float = 60.0) -> None:
        """Until a real request (stream:1) is answered in full."""
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            if self.process is None or self.process.poll() is not None:
                if port_taken(self.log_tail()):
                    self.restart()
                    continue
                raise RuntimeError(f"{self.label} server exited at start:\n{self.log_tail()}")
            result = await client.assist(HOST, self.port, "stream:1", timeout=5)
            if result.ok:
                return
            last = "; ".join(result.problems)
            await asyncio.sleep(0.2)
        raise RuntimeError(f"{self.label} server not ready after {timeout}s ({last}):\n{self.log_tail()}")

    def rss_kb(self) -> int:
        """The server process's resident set size (VmRSS), in KiB."""
        with open(f"/proc/{self.pid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"VmRSS:"):
                    return int(line.split()[1])
        raise RuntimeError("no VmRSS")

    def cpu_seconds(self) -> float:
        """CPU time the server process's threads have used (schedstat: nanoseconds, not clock ticks)."""
        total = 0
        for task in os.listdir(f"/proc/{self.pid}/task"):
            try:
                with open(f"/proc/{self.pid}/task/{task}/schedstat", "rb") as f:
                    total += int(f.read().split()[0])
            except (OSError, ValueError, IndexError):
                pass  # a thread that ended meanwhile
        return total / 1e9

    def stop(self, grace: float = 10.0, signal_number: int = signal.SIGTERM) -> None:
        """SIGTERM (or `signal_number`) to its process group, SIGKILL after `grace` seconds."""
        process = self.process
        if process is None:
            return
        if process.poll() is None:
            try:
                os.killpg(process.pid, signal_number)
            except ProcessLookupError:
                pass
            try:
                process.wait(grace)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(process.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                process.wait(5)
        self._log.close()
        self.process = None


def make_servers(keys: list[str], log_dir: Path, reference_python: str | None, wait_seconds: float) -> list[Server]:
    servers = []
    for key in keys:
        if key == "ours":
            servers.append(
                Server(
                    "ours",
                    "ours",
                    [sys.executable, "-m", "app", "serve", "--host", HOST],
                    {
                        "ASSIST_AGENT": "bench.agent:BenchAgent",
                        "ASSIST_LOG_LEVEL": "warning",
                        "ASSIST_REQUEST_TIMEOUT": str(max(120.0, wait_seconds * 4)),
                        # Above the 5,000-stream load (the default caps are 1,000 streams and
                        # 2,000 connections per worker; the fd limit still bounds the latter).
                        "ASSIST_MAX_STREAMS": "100000",
                        "ASSIST_MAX_CONNECTIONS": "100000",
                    },
                    log_dir / "ours.log",
                )
            )
        elif key == "reference":
            assert reference_python is not None
            servers.append(
                Server(
                    "reference",
                    "0.3.0",
                    [reference_python, "-m", "bench.reference_server", "--host", HOST],
                    {},
                    log_dir / "reference.log",
                )
            )
        elif key == "bare":
            servers.append(
                Server(
                    "bare",
                    "bare",
                    [sys.executable, "-m", "bench.bare_server", "--host", HOST],
                    {},
                    log_dir / "bare.log",
                )
            )
        else:
            raise ValueError(f"unknown server {key!r}")
    return servers
