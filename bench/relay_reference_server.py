"""The 0.3.0 package's DefaultServer serving the relay load's 0.3.0-style agent (bench/relay_agents.py).

Run by the reference virtual environment's python, from the repository root:

    /tmp/bench-reference-venv/bin/python -m bench.relay_reference_server --port 8001

DefaultServer.run() takes a host and a port only: uvicorn's defaults otherwise
(uvloop and httptools when installed, info-level logs with one line per request).
"""

from __future__ import annotations

import argparse
import os

os.environ["BENCH_FRAMEWORK"] = "sentient_agent_framework"

from sentient_agent_framework import DefaultServer  # noqa: E402

from bench.relay_agents import RelayAgent  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    DefaultServer(RelayAgent("relay")).run(host=args.host, port=args.port)


if __name__ == "__main__":
    main()
