"""Every Python and shell block of README.md and docs/*.md runs, as a reader would run it.

The convention, as written in the Markdown:

- A block fenced ```python is run: exec'd in a fresh namespace (`__name__` is not
  "__main__", so an `if __name__ == "__main__":` part, which would serve until stopped, is
  not), with top-level `await` allowed as in `python -m asyncio`.
- A block fenced ```bash is run with bash (`set -euo pipefail`, stdin empty), with the bin
  folder of the Python running the tests first on PATH (its environment's `assist`) and the
  checkout on PYTHONPATH, so `assist ...` and `python -m app ...` both work.
  - A line that starts the service (`assist serve ...`, `python -m app serve ...`, with or
    without a trailing `&`) is run by the test instead: that command on a loopback socket the
    test bound (`--fd`), until /healthz answers; then the rest of the block; then it is stopped.
  - `127.0.0.1:8000` and `localhost:8000` are rewritten to the port of the service the block
    talks to: its own, else one `assist serve` (the showcase) started once for the module.
  - A block whose first line starts with `$ ` is a transcript: its `$ ` lines are the
    commands, and what they print must be its other lines.
- Both run in one scratch folder, a reader's project: `agents/` holds the checkout's agent
  files, and `examples/` is the checkout's.
- `<!-- file: agents/weather.py -->` on the line just before a block: the block is also that
  file of the scratch folder (all are written before any block runs), as the reader is asked
  to write it. It is run as any other block.
- `<!-- not run: <why> -->` on the line just before a block: not run, because it is a
  fragment, or needs a key, Docker, kubectl or the network; reported as skipped, with why.
- ```text blocks (output, layouts, wire formats) are never run. A block fenced in any other
  language fails `test_every_block_is_run_or_says_why_not`, so no block escapes the choice.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.server import RunningServer, clean_env, running_server

ROOT = Path(__file__).resolve().parents[1]
# The environment running the tests (`.venv`, `.venv-3.12`): its `assist`, never another's.
VENV_BIN = Path(sys.executable).parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LANGUAGES = {"python", "bash", "text"}

FENCE = re.compile(r"^(?P<indent> *)```(?P<lang>[\w+-]*)\s*$")
MARKER = re.compile(r"^\s*<!-- (?P<kind>not run|file): (?P<value>.+?) -->\s*$")
SERVE = re.compile(
    r"^\s*(?P<command>(?:[A-Z][A-Z0-9_]*=\S*\s+)*(?:assist|python3? -m (?:app|sentient_assist)) serve\b[^&#]*?)"
    r"\s*&?\s*(?:#.*)?$"
)
PORT = re.compile(r"\b(?:127\.0\.0\.1|localhost):8000\b")
SHELL_TIMEOUT = 60
# Programs the shell blocks use that a machine may lack: a block that needs one it lacks is skipped, saying so.
TOOLS = ("curl", "jq")


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # of the opening fence, 1-based
    lang: str
    code: str
    marker: tuple[str, str] | None  # ("not run", why) or ("file", path)

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"

    @property
    def skip_reason(self) -> str | None:
        return self.marker[1] if self.marker and self.marker[0] == "not run" else None

    @property
    def file(self) -> str | None:
        return self.marker[1] if self.marker and self.marker[0] == "file" else None


def blocks_of(page: Path) -> list[Block]:
    lines = page.read_text().splitlines()
    found, index = [], 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if not opening:
            index += 1
            continue
        indent, body, end = len(opening["indent"]), [], index + 1
        while end < len(lines) and lines[end].strip() != "```":
            body.append(lines[end][indent:])
            end += 1
        before = MARKER.match(lines[index - 1]) if index else None
        marker = (before["kind"], before["value"]) if before else None
        found.append(Block(page, index + 1, opening["lang"], "\n".join(body) + "\n", marker))
        index = end + 1
    return found


ALL_BLOCKS = [block for page in PAGES for block in blocks_of(page)]
RUN_BLOCKS = [block for block in ALL_BLOCKS if block.lang in {"python", "bash"}]


def test_every_block_is_run_or_says_why_not():
    problems = [f"{b.where}: fenced {b.lang or '(no language)'!r}" for b in ALL_BLOCKS if b.lang not in LANGUAGES]
    problems += [
        f"{b.where}: a {b.marker[0]} marker on a text block" for b in ALL_BLOCKS if b.lang == "text" and b.marker
    ]
    for page in PAGES:  # a marker must sit on the line just before a fence, or it marks nothing
        lines = page.read_text().splitlines()
        for number, line in enumerate(lines, 1):
            if MARKER.match(line) and (number == len(lines) or not FENCE.match(lines[number])):
                problems.append(f"{page.relative_to(ROOT)}:{number}: a marker not followed by a block")
    assert not problems, "\n".join(problems)
    assert any(b.skip_reason is None for b in RUN_BLOCKS)


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A reader's project: the checkout's agent files and examples, and the files the docs ask for."""
    folder = tmp_path_factory.mktemp("project")
    (folder / "agents").mkdir()
    for source in (ROOT / "agents").glob("*.py"):
        (folder / "agents" / source.name).symlink_to(source)
    (folder / "examples").symlink_to(ROOT / "examples")
    for block in ALL_BLOCKS:
        if block.file:
            assert not Path(block.file).is_absolute() and ".." not in Path(block.file).parts, block.where
            (folder / block.file).parent.mkdir(parents=True, exist_ok=True)
            (folder / block.file).write_text(block.code)
    return folder


class Services:
    """The module's one `assist serve`, started when a block first needs it."""

    def __init__(self, project: Path, stack: ExitStack) -> None:
        self._project, self._stack, self._port = project, stack, 0

    def shared_port(self) -> int:
        if not self._port:
            self._port = serving(self._stack, "assist serve", self._project).port
        return self._port


@pytest.fixture(scope="module")
def services(project: Path) -> Iterator[Services]:
    with ExitStack() as stack:
        yield Services(project, stack)


def shell_env(**extra: str) -> dict[str, str]:
    return clean_env({"PATH": f"{VENV_BIN}{os.pathsep}{os.environ['PATH']}", "PYTHONPATH": str(ROOT), **extra})


def serve_command(line: str) -> list[str]:
    """`[VAR=value ...] assist serve ...` as an argv: `env` sets the variables."""
    words = shlex.split(line)
    assignments = [word for word in words if re.fullmatch(r"[A-Z][A-Z0-9_]*=.*", word)]
    command = words[len(assignments) :]
    command[0] = shutil.which(command[0], path=shell_env()["PATH"]) or command[0]
    return ["env", f"PYTHONPATH={ROOT}", *assignments, *command]


def serving(stack: ExitStack, line: str, project: Path) -> RunningServer:
    """The service as `line` starts it, on a socket of the test's (`--fd`), until `stack` closes."""
    return stack.enter_context(running_server(command=serve_command(line), cwd=project, env=shell_env()))


def with_port(text: str, port: int) -> str:
    return PORT.sub(f"127.0.0.1:{port}", text)


def run_bash(script: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", "set -euo pipefail\n" + script],
        cwd=cwd,
        env=shell_env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=SHELL_TIMEOUT,
    )


def run_shell_block(block: Block, project: Path, services: Services) -> None:
    for tool in TOOLS:
        if re.search(rf"(?:^|[|;&(]|\$\()\s*{tool}\b", block.code, flags=re.MULTILINE) and not shutil.which(tool):
            pytest.skip(f"{block.where}: {tool} is not installed")
    lines = block.code.splitlines()
    serving_lines = [line for line in lines if SERVE.match(line)]
    assert len(serving_lines) <= 1, f"{block.where}: at most one line that starts the service"
    rest = [line for line in lines if not SERVE.match(line)]
    with ExitStack() as stack:
        port = 0
        if serving_lines:
            port = serving(stack, SERVE.match(serving_lines[0])["command"], project).port  # type: ignore[index]
        elif PORT.search(block.code):
            port = services.shared_port()
        if rest and rest[0].startswith("$ "):
            commands = [line[2:] for line in rest if line.startswith("$ ")]
            expected = "\n".join(line for line in rest if not line.startswith("$ ")).strip()
            printed = []
            for command in commands:
                done = run_bash(with_port(command, port), project)
                assert done.returncode == 0, f"{block.where}: {command}\n{done.stdout}{done.stderr}"
                printed.append(done.stdout)
            assert "".join(printed).strip() == with_port(expected, port), block.where
        elif any(line.strip() and not line.lstrip().startswith("#") for line in rest):
            done = run_bash(with_port("\n".join(rest), port), project)
            assert done.returncode == 0, f"{block.where} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"


def run_python_block(block: Block, project: Path, services: Services, monkeypatch: pytest.MonkeyPatch) -> None:
    source = block.code
    if PORT.search(source):
        source = with_port(source, services.shared_port())
    for name in [name for name in os.environ if name.startswith(("ASSIST_", "MODEL_"))]:
        monkeypatch.delenv(name)
    monkeypatch.chdir(project)
    code = compile(source, block.where, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    namespace = {"__name__": "doc_example"}
    if code.co_flags & inspect.CO_COROUTINE:
        asyncio.run(eval(code, namespace))  # top-level await: the block is a coroutine
    else:
        exec(code, namespace)


@pytest.mark.parametrize("block", RUN_BLOCKS, ids=[block.where for block in RUN_BLOCKS])
def test_block_runs(block: Block, project: Path, services: Services, monkeypatch: pytest.MonkeyPatch):
    if block.skip_reason:
        pytest.skip(f"{block.where}: not run: {block.skip_reason}")
    if block.lang == "python":
        run_python_block(block, project, services, monkeypatch)
    else:
        run_shell_block(block, project, services)
