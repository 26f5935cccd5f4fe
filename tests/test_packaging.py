"""The package as pip installs it: only `app` in site-packages, and agents found where the
user keeps them (./agents, ASSIST_AGENTS_DIR) or registered by installed packages."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import httpx
import pytest

from tests.support.server import ROOT, clean_env, free_port, running_command
from tests.support.sse import new_body, read_stream

BIN = Path(sys.executable).parent
AGENT_FILE = '''
from app import AbstractAgent


class NewAgent(AbstractAgent):
    """Dropped into ./agents after the install."""

    async def assist(self, session, query, response_handler):
        await response_handler.respond("ANSWER", "from a file added after the install")
'''
PLUGIN_MODULE = '''
from app import AbstractAgent


class PluginAgent(AbstractAgent):
    """Registered by an installed package."""

    async def assist(self, session, query, response_handler):
        await response_handler.respond("ANSWER", "from a package")
'''


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> zipfile.ZipFile:
    """The wheel pip builds from a copy of the project (a build in the checkout leaves build/)."""
    source = tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, source / name)
    for folder in ("app", "agents"):
        shutil.copytree(ROOT / folder, source / folder, ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(source)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (built,) = out.glob("sentient_assist-*.whl")
    return zipfile.ZipFile(built)


def test_the_wheel_installs_app_and_nothing_else_at_the_top_level(wheel):
    top_level = {name.split("/")[0] for name in wheel.namelist() if not name.split("/")[0].endswith(".dist-info")}
    assert top_level == {"app"}
    dist_info = next(name.split("/")[0] for name in wheel.namelist() if ".dist-info/" in name)
    assert wheel.read(f"{dist_info}/top_level.txt").decode().split() == ["app"]


def test_the_wheel_carries_its_types_license_and_command(wheel):
    names = wheel.namelist()
    assert "app/py.typed" in names
    assert any(name.endswith(".dist-info/licenses/LICENSE") for name in names)
    entry_points = next(name for name in names if name.endswith(".dist-info/entry_points.txt"))
    assert "assist = app.__main__:main" in wheel.read(entry_points).decode()


@pytest.fixture
def project(tmp_path) -> Path:
    """A user's working directory: ./agents with a new file, and an installed agent package."""
    (tmp_path / "agents").mkdir()
    (tmp_path / "agents" / "fresh.py").write_text(AGENT_FILE)
    site = tmp_path / "site"
    dist_info = site / "plugin_agents-1.0.dist-info"
    dist_info.mkdir(parents=True)
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: plugin-agents\nVersion: 1.0\n")
    (dist_info / "entry_points.txt").write_text("[sentient_assist.agents]\nplugged = plugin_agents:PluginAgent\n")
    (site / "plugin_agents.py").write_text(PLUGIN_MODULE)
    return tmp_path


def project_env(project: Path) -> dict[str, str]:
    return clean_env({"PYTHONPATH": str(project / "site")})


def test_assist_and_python_m_app_list_the_same_agents(project):
    commands = {"assist": [str(BIN / "assist"), "agents"], "python -m app": [sys.executable, "-m", "app", "agents"]}
    listed = {
        name: subprocess.run(
            command, cwd=project, env=project_env(project), capture_output=True, text=True, timeout=30, check=True
        ).stdout
        for name, command in commands.items()
    }
    assert listed["assist"] == listed["python -m app"]
    names = [line.split()[0] for line in listed["assist"].splitlines()]
    assert names == ["fresh", "plugged"]


def test_assist_agents_says_where_it_looked_when_it_finds_none(tmp_path):
    done = subprocess.run(
        [str(BIN / "assist"), "agents"], cwd=tmp_path, env=clean_env(), capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0 and done.stdout == ""
    assert str(tmp_path.resolve() / "agents") in done.stderr


@pytest.mark.parametrize("agent", ["fresh", "plugged"])
def test_assist_serve_serves_a_file_of_the_working_directory_and_a_package_agent(project, agent):
    port = free_port()
    command = [str(BIN / "assist"), "serve", "--port", str(port), "--agent", agent]
    with running_command(command, port, {"PYTHONPATH": str(project / "site")}, cwd=project) as server:
        stream = read_stream(server.url, new_body("hi"))
    assert stream.names() == ["ANSWER", "done"]


def test_agents_dir_names_another_directory(project, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(project / "agents", elsewhere)
    (elsewhere / "fresh.py").rename(elsewhere / "moved.py")
    done = subprocess.run(
        [str(BIN / "assist"), "agents"],
        cwd=project,
        env=clean_env({"ASSIST_AGENTS_DIR": str(elsewhere)}),
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    assert [line.split()[0] for line in done.stdout.splitlines()] == ["moved"]


def answer_of(url: str) -> str:
    (event,) = [event for event in read_stream(url, new_body("hi")).events if event["event_name"] == "ANSWER"]
    return str(event["content"])


def test_reload_restarts_when_a_file_of_an_agents_dir_elsewhere_changes(project, tmp_path_factory):
    elsewhere = tmp_path_factory.mktemp("elsewhere")  # outside the working directory (`project`)
    agent_file = elsewhere / "fresh.py"
    agent_file.write_text(AGENT_FILE)
    port = free_port()
    command = [str(BIN / "assist"), "serve", "--reload", "--port", str(port), "--agent", "fresh"]
    with running_command(command, port, {"ASSIST_AGENTS_DIR": str(elsewhere)}, cwd=project) as server:
        assert answer_of(server.url) == "from a file added after the install"
        agent_file.write_text(AGENT_FILE.replace("from a file added after the install", "edited"))
        deadline = time.monotonic() + 20
        answer = ""
        while time.monotonic() < deadline and answer != "edited":
            time.sleep(0.3)
            try:
                answer = answer_of(server.url)
            except httpx.TransportError:
                continue  # restarting
        assert answer == "edited"
