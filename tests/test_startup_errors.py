"""Start-up errors a newcomer causes (issue 41, item 4): `assist serve`, as a user types it,
stops with exit 2 and one line naming the variable and how to fix it, never a traceback. A
missing extra is simulated by a sitecustomize that makes its package unimportable."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.server import ROOT, clean_env

ASSIST = Path(sys.executable).with_name("assist")  # the console script pip installs beside python

BLOCKER = """
import sys

class _Missing:
    def find_spec(self, name, path=None, target=None):
        if name.startswith({prefixes!r}):
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None

sys.meta_path.insert(0, _Missing())
"""


def serve(env: dict[str, str], tmp_path: Path, missing: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    env = {**env, "ASSIST_PORT": "1"}  # never reached: each case stops before it listens
    if missing:
        (tmp_path / "sitecustomize.py").write_text(BLOCKER.format(prefixes=missing))
        env["PYTHONPATH"] = f"{tmp_path}:{ROOT}"
    return subprocess.run(
        [str(ASSIST), "serve"], cwd=tmp_path, env=clean_env(env), capture_output=True, text=True, timeout=30
    )


@pytest.mark.parametrize(
    ("env", "missing", "said"),
    [
        (
            {"ASSIST_REDIS_URL": "http://x"},
            (),
            "ASSIST_REDIS_URL=(hidden): a Redis URL starts with redis://, rediss:// or unix://",
        ),
        ({"ASSIST_RESUME_SECRET": "short"}, (), "ASSIST_RESUME_SECRET=(hidden): at least 16 characters"),
        (
            {"MODEL_BASE_URL": "localhost:8001", "MODEL_NAME": "m", "ASSIST_AGENT": "chat"},
            (),
            "MODEL_BASE_URL='localhost:8001': an http:// or https:// URL",
        ),
        (
            {"ASSIST_REDIS_URL": "redis://127.0.0.1:1/0"},
            ("redis",),
            "ASSIST_REDIS_URL is set, and what the replicas share in Redis (answered pauses, resumable runs,"
            " A2A tasks) needs the redis package: pip install 'sentient-assist[redis]'",
        ),
        (
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"},
            ("opentelemetry.sdk", "opentelemetry.exporter"),
            "OTEL_EXPORTER_OTLP_ENDPOINT is set, but the OpenTelemetry SDK or its OTLP exporter is not installed",
        ),
    ],
    ids=["redis-scheme", "short-secret", "model-url-scheme", "redis-extra", "otel-extra"],
)
def test_a_start_up_error_is_one_line_naming_the_variable(tmp_path, env, missing, said):
    result = serve(env, tmp_path, missing)
    assert result.returncode == 2, result.stderr[-2000:]
    assert said in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) <= 2, result.stderr


@pytest.mark.parametrize("variable", ["ASSIST_REDIS_URL", "MODEL_BASE_URL"])
def test_an_empty_value_is_the_default(variable):
    from sentient_assist.server.settings import load_settings

    settings = load_settings(**{variable.removeprefix("ASSIST_").lower(): ""})
    assert getattr(settings, variable.removeprefix("ASSIST_").lower()) in (None, "")
