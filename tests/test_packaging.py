"""The package as pip installs it: only `sentient_assist` in site-packages, its built-in agents
registered as entry points, and agents found where the user keeps them (./agents,
ASSIST_AGENTS_DIR) or registered by installed packages. The wheel is installed beside a
user's own `app` package, laid out as FastAPI's "Bigger Applications" guide shows."""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import httpx
import pytest

from tests.support.server import ROOT, clean_env, running_server
from tests.support.sse import new_body, read_stream
from tests.support.waiting import wait_until

BIN = Path(sys.executable).parent
BUILT_IN = ["assistant", "chat", "concierge", "echo", "showcase", "trip"]
AGENT_FILE = '''
from sentient_assist import AbstractAgent


class NewAgent(AbstractAgent):
    """Dropped into ./agents after the install."""

    async def assist(self, session, query, response_handler):
        await response_handler.respond("ANSWER", "from a file added after the install")
'''
PLUGIN_MODULE = '''
from sentient_assist import AbstractAgent


class PluginAgent(AbstractAgent):
    """Registered by an installed package."""

    async def assist(self, session, query, response_handler):
        await response_handler.respond("ANSWER", "from a package")
'''


# A project laid out as FastAPI's "Bigger Applications" guide shows: its own package `app`.
USER_PROJECT = {
    "app/__init__.py": "",
    "app/routers/__init__.py": "",
    "app/routers/greetings.py": (
        "from fastapi import APIRouter\n\n"
        "router = APIRouter()\n\n\n"
        "def greeting(name: str) -> str:\n"
        "    return f'hello {name}, from the user app'\n\n\n"
        "@router.get('/greetings/{name}')\n"
        "def read_greeting(name: str) -> dict[str, str]:\n"
        "    return {'greeting': greeting(name)}\n"
    ),
    "app/main.py": (
        "from fastapi import FastAPI\n\n"
        "from app.routers import greetings\n"
        "from sentient_assist import add_routes\n"
        "from sentient_assist.registry import load_agent\n\n"
        "app = FastAPI()\n"
        "app.include_router(greetings.router)\n"
        "app.get('/healthz')(lambda: {'status': 'ok'})\n"
        "add_routes(app, load_agent('echo'))\n"
    ),
    # An agent of ./agents that uses the user's own code.
    "agents/greeter.py": (
        "from app.routers.greetings import greeting\n"
        "from sentient_assist import AbstractAgent\n\n\n"
        "class GreeterAgent(AbstractAgent):\n"
        "    async def assist(self, session, query, response_handler):\n"
        "        await response_handler.respond('ANSWER', greeting(query.prompt))\n"
    ),
}


@pytest.fixture(scope="module")
def wheel_path(tmp_path_factory) -> Path:
    """The wheel pip builds from a copy of the project (a build in the checkout leaves build/)."""
    source = tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, source / name)
    for folder in ("sentient_assist", "app", "agents"):  # app/ and agents/ must stay out of the wheel
        shutil.copytree(ROOT / folder, source / folder, ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(source)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (built,) = out.glob("sentient_assist-*.whl")
    return built


@pytest.fixture(scope="module")
def wheel(wheel_path) -> zipfile.ZipFile:
    return zipfile.ZipFile(wheel_path)


@pytest.fixture(scope="module")
def installed(wheel_path, tmp_path_factory) -> Path:
    """A fresh venv holding the built wheel; its dependencies are the test venv's (no download):
    a .pth names the test venv's site-packages, whose own .pth files (the checkout's editable
    install among them) are not read from there."""
    venv = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", str(wheel_path)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    (Path(site) / "test-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return venv / "bin"


@pytest.fixture
def user_project(tmp_path) -> Path:
    for name, text in USER_PROJECT.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return tmp_path


def test_the_wheel_installs_sentient_assist_and_nothing_else_at_the_top_level(wheel):
    top_level = {name.split("/")[0] for name in wheel.namelist() if not name.split("/")[0].endswith(".dist-info")}
    assert top_level == {"sentient_assist"}
    dist_info = next(name.split("/")[0] for name in wheel.namelist() if ".dist-info/" in name)
    assert wheel.read(f"{dist_info}/top_level.txt").decode().split() == ["sentient_assist"]


def test_the_wheel_carries_its_types_license_command_and_built_in_agents(wheel):
    names = wheel.namelist()
    assert "sentient_assist/py.typed" in names
    assert any(name.endswith(".dist-info/licenses/LICENSE") for name in names)
    entry_points = wheel.read(next(name for name in names if name.endswith(".dist-info/entry_points.txt"))).decode()
    assert "assist = sentient_assist.cli:main" in entry_points
    for agent in BUILT_IN:
        assert f"sentient_assist/agents/{agent}.py" in names
        assert f"\n{agent} = sentient_assist.agents.{agent}:" in entry_points


def test_the_installed_package_is_the_wheel_not_the_checkout(installed, tmp_path):
    where = subprocess.run(
        [str(installed / "python"), "-c", "import sentient_assist; print(sentient_assist.__file__)"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
        env=clean_env(),
    ).stdout
    assert str(ROOT) not in where and "site-packages" in where


def test_a_users_own_app_package_and_ours_work_in_one_process(installed, user_project):
    """`from app.main import app` is the user's; `/assist` streams from it (the built-in echo),
    beside its own routes."""
    code = (
        "from fastapi.testclient import TestClient\n"
        "from app.main import app\n"
        "from app.routers.greetings import greeting\n"
        "from sentient_assist import add_routes\n"
        "client = TestClient(app)\n"
        "print(client.get('/greetings/ada').json()['greeting'])\n"
        "print(add_routes.__module__)\n"
    )
    done = subprocess.run(
        [str(installed / "python"), "-c", code], cwd=user_project, capture_output=True, text=True, env=clean_env()
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["hello ada, from the user app", "sentient_assist.server.app"]
    command = [str(installed / "python"), "-m", "uvicorn", "app.main:app"]
    with running_server(command=command, cwd=user_project) as server:
        stream = read_stream(server.url, new_body("grace"))
        assert httpx.get(f"{server.url}/greetings/ada").json() == {"greeting": "hello ada, from the user app"}
    assert stream.names() == ["FINAL_RESPONSE", "FINAL_RESPONSE", "done"]
    assert stream.events[0]["content"] == "grace"


@pytest.mark.parametrize("workers", [[], ["--workers", "2"]], ids=["one process", "two workers"])
def test_assist_serve_in_a_users_project_serves_its_agent_that_imports_its_app(installed, user_project, workers):
    """Workers build the app with our own factory: the user's `app.main:app` serves echo, so a
    worker that imported it would answer "lin"."""
    command = [str(installed / "assist"), "serve", "--agent", "greeter", *workers]
    with running_server(command=command, cwd=user_project) as server:
        streams = [read_stream(server.url, new_body("lin")) for _ in range(4)]
    for stream in streams:
        assert stream.names() == ["ANSWER", "done"]
        assert stream.events[0]["content"] == "hello lin, from the user app"


def test_assist_serve_in_an_empty_folder_serves_the_built_in_showcase(installed, tmp_path):
    with running_server(command=[str(installed / "assist"), "serve"], cwd=tmp_path) as server:
        stream = read_stream(server.url, new_body("hello"))
    assert stream.names()[:2] == ["PLAN", "SOURCES"] and stream.names()[-1] == "done"
    assert {event["source"] for event in stream.events} == {"showcase"}


def test_a_file_of_agents_wins_over_the_built_in_agent_of_its_name(installed, tmp_path):
    (tmp_path / "agents").mkdir()
    (tmp_path / "agents" / "showcase.py").write_text(AGENT_FILE)
    with running_server(command=[str(installed / "assist"), "serve"], cwd=tmp_path) as server:
        stream = read_stream(server.url, new_body("hello"))
    assert stream.names() == ["ANSWER", "done"]
    assert stream.events[0]["content"] == "from a file added after the install"


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


def test_assist_and_python_m_sentient_assist_list_the_same_agents(project):
    commands = {
        "assist": [str(BIN / "assist"), "agents"],
        "python -m sentient_assist": [sys.executable, "-m", "sentient_assist", "agents"],
    }
    listed = {
        name: subprocess.run(
            command, cwd=project, env=project_env(project), capture_output=True, text=True, timeout=30, check=True
        ).stdout
        for name, command in commands.items()
    }
    assert listed["assist"] == listed["python -m sentient_assist"]
    names = [line.split()[0] for line in listed["assist"].splitlines()]
    assert names == sorted(["fresh", "plugged", *BUILT_IN])


def test_assist_agents_in_an_empty_folder_lists_the_built_in_agents(tmp_path):
    done = subprocess.run(
        [str(BIN / "assist"), "agents"], cwd=tmp_path, env=clean_env(), capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0
    assert [line.split()[0] for line in done.stdout.splitlines()] == BUILT_IN


@pytest.mark.parametrize("agent", ["fresh", "plugged"])
def test_assist_serve_serves_a_file_of_the_working_directory_and_a_package_agent(project, agent):
    command = [str(BIN / "assist"), "serve", "--agent", agent]
    with running_server({"PYTHONPATH": str(project / "site")}, command=command, cwd=project) as server:
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
    assert [line.split()[0] for line in done.stdout.splitlines()] == sorted(["moved", *BUILT_IN])


def answer_of(url: str) -> str:
    (event,) = [event for event in read_stream(url, new_body("hi")).events if event["event_name"] == "ANSWER"]
    return str(event["content"])


def test_reload_restarts_when_a_file_of_an_agents_dir_elsewhere_changes(project, tmp_path_factory):
    elsewhere = tmp_path_factory.mktemp("elsewhere")  # outside the working directory (`project`)
    agent_file = elsewhere / "fresh.py"
    agent_file.write_text(AGENT_FILE)
    command = [str(BIN / "assist"), "serve", "--reload", "--agent", "fresh"]
    with running_server({"ASSIST_AGENTS_DIR": str(elsewhere)}, command=command, cwd=project) as server:
        assert answer_of(server.url) == "from a file added after the install"
        agent_file.write_text(AGENT_FILE.replace("from a file added after the install", "edited"))

        def edited() -> bool:
            try:
                stream = read_stream(server.url, new_body("hi"))
            except httpx.TransportError:
                return False  # restarting
            # While it restarts, an answer may come from neither agent (the edit half written).
            return [e["content"] for e in stream.events if e["event_name"] == "ANSWER"] == ["edited"]

        assert wait_until(edited, 20)
