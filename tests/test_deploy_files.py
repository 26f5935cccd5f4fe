"""The Docker files, checked by reading them (no base image can be pulled where the tests run):
a stopped container ends its streams cleanly, and settings cannot make it unreachable."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from sentient_assist.runtime.errors import SettingsError
from sentient_assist.server.serving import BACKSTOP_SECONDS
from sentient_assist.server.settings import Settings, load_settings

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


@pytest.mark.parametrize("name", ["assist", "replica"])
def test_compose_keeps_the_container_reachable_and_its_grace_inside_the_stop_period(name):
    service = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"][name]
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


# --- docker-compose.yml's `replicas` profile: N replicas behind the shipped nginx configuration.


def compose_services() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]


def seconds(period: str) -> float:
    return float(period.removesuffix("s"))


def test_the_one_command_start_is_the_single_service_on_port_8000():
    services = compose_services()
    single = services["assist"]
    assert "profiles" not in single  # `docker compose up --build` starts it, and only it
    assert single["ports"] == ["8000:8000"] and single["build"] == "."
    assert all("profiles" in service for name, service in services.items() if name != "assist")


def test_the_replicas_run_as_the_single_service_does_with_no_published_port():
    services = compose_services()
    replica, single = services["replica"], services["assist"]
    assert replica["profiles"] == ["replicas"]
    assert "ports" not in replica  # several containers cannot publish one host port
    for key in ("build", "env_file", "stop_grace_period", "restart"):
        assert replica[key] == single[key], key
    # The single service's environment, plus the one resume secret every replica must share.
    assert {k: v for k, v in replica["environment"].items() if k != "ASSIST_RESUME_SECRET"} == single["environment"]
    count = re.fullmatch(r"\$\{ASSIST_REPLICAS:-(\d+)\}", str(replica["deploy"]["replicas"]))
    assert count is not None and int(count.group(1)) >= 2


def test_the_proxy_runs_the_shipped_nginx_files_in_front_of_every_replica():
    services = compose_services()
    proxy = services["proxy"]
    assert proxy["profiles"] == ["replicas"] and proxy["depends_on"] == ["replica"]
    # `resolve` in an upstream block, which follows the replicas, is in nginx from 1.27.3.
    version = re.fullmatch(r"nginx:(\d+)\.(\d+)(?:\.\d+)?-alpine", proxy["image"])
    assert version is not None and (int(version.group(1)), int(version.group(2))) >= (1, 28)
    mounts = dict(volume.removesuffix(":ro").split(":") for volume in proxy["volumes"])
    assert mounts["./deploy/nginx"] == "/etc/nginx/assist"
    assert mounts["./deploy/nginx/site-compose.conf"] == "/etc/nginx/conf.d/default.conf"

    site = (ROOT / "deploy" / "nginx" / "site-compose.conf").read_text()
    for included in re.findall(r"(?m)^\s*include assist/(\S+);", site):
        assert (ROOT / "deploy" / "nginx" / included).is_file(), included
    assert re.search(r"(?m)^include assist/http\.conf;", site) and re.search(r"include assist/proxy\.conf;", site)
    # nginx listens where the port mapping points, and asks Docker's DNS for every replica,
    # on the port the image serves on.
    (published,) = proxy["ports"]
    listen = re.search(r"(?m)^\s*listen (\d+);", site)
    assert listen is not None and published.split(":")[-1] == listen.group(1)
    upstream = re.search(r"(?m)^\s*server (\w+):(\d+) resolve;", site)
    assert upstream is not None
    assert upstream.group(1) == "replica" and upstream.group(2) == image_env()["ASSIST_PORT"]
    assert re.search(r"(?m)^resolver 127\.0\.0\.11 ", site)

    # nginx waits for open streams when it stops: as long as a replica gives them.
    assert seconds(proxy["stop_grace_period"]) >= seconds(services["replica"]["stop_grace_period"])


def test_replicas_share_one_resume_secret_or_refuse_to_start():
    """Unset, compose gives the replicas an empty ASSIST_RESUME_SECRET, which the settings
    refuse (naming it), rather than each replica making its own and failing resumes."""
    value = compose_services()["replica"]["environment"]["ASSIST_RESUME_SECRET"]
    assert value == "${ASSIST_RESUME_SECRET:-}"  # from the shell or the project's .env
    with pytest.raises(SettingsError, match="ASSIST_RESUME_SECRET"):
        load_settings(resume_secret="")


def dockerfile_stages() -> list[str]:
    return (ROOT / "Dockerfile").read_text().split("\nFROM ")[1:]


def test_the_builder_copies_every_file_the_package_build_reads():
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    copied = " ".join(re.findall(r"(?m)^COPY (?!--from)(.+) \S+$", dockerfile_stages()[0]))
    for needed in [project["readme"], *project["license-files"], "pyproject.toml", "sentient_assist/"]:
        assert needed in copied.split(), needed


def test_the_final_stage_holds_no_installer_and_one_copy_of_the_code():
    builder, final = dockerfile_stages()
    assert "venv --without-pip" in builder  # the venv the final stage copies has no pip of its own
    assert re.search(r"pip uninstall .*-y .*\bpip\b", final) and "ensurepip" in final  # nor the base image's
    copies = re.findall(r"(?m)^COPY (?!--from)(\S+)", final)
    assert copies == ["agents/"]  # the code is the installed package; the agents are files it reads
    assert re.search(r"(?m)^WORKDIR /srv$", final)  # ./agents of the working directory
