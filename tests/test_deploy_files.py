"""The Docker files, checked by reading them (no base image can be pulled where the tests run):
a stopped container ends its streams cleanly, and settings cannot make it unreachable."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from app.server.serving import BACKSTOP_SECONDS
from app.server.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
DOCKER_STOP_DEFAULT = 10  # seconds `docker stop` waits before SIGKILL


def image_env() -> dict[str, str]:
    text = (ROOT / "Dockerfile").read_text().split("FROM ")[-1]  # the final stage
    block = re.search(r"^ENV (.+?)(?<!\\)$", text, re.S | re.M)
    assert block is not None
    pairs = re.findall(r"(\w+)=(\S+)", block.group(1))
    return dict(pairs)


def test_a_plain_docker_stop_gives_streams_their_grace_before_the_kill():
    env = image_env()
    grace = float(env["ASSIST_SHUTDOWN_GRACE"])
    assert grace < DOCKER_STOP_DEFAULT  # streams end themselves (error, done) before SIGKILL
    assert env["ASSIST_HOST"] == "0.0.0.0"


def test_compose_keeps_the_container_reachable_and_its_grace_inside_the_stop_period():
    service = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]["assist"]
    environment = service["environment"]  # over env_file: .env cannot move the container to 127.0.0.1
    assert environment["ASSIST_HOST"] == "0.0.0.0"
    stop_period = float(service["stop_grace_period"].removesuffix("s"))
    assert float(environment["ASSIST_SHUTDOWN_GRACE"]) + 1 < stop_period
    assert Settings(shutdown_grace=float(environment["ASSIST_SHUTDOWN_GRACE"])).shutdown_grace + BACKSTOP_SECONDS <= (
        stop_period
    )


def test_the_readme_docker_run_line_gives_the_grace_it_sets():
    readme = (ROOT / "README.md").read_text()
    (line,) = [line for line in readme.splitlines() if "docker run" in line and "sentient-assist" in line]
    timeout = float(re.search(r"--stop-timeout (\d+)", line).group(1))  # type: ignore[union-attr]
    grace = float(re.search(r"ASSIST_SHUTDOWN_GRACE=(\d+)", line).group(1))  # type: ignore[union-attr]
    assert grace + BACKSTOP_SECONDS <= timeout
