"""The 0.3.0 package's DefaultServer serving a benchmark agent (bench/agent.py unless told otherwise).

Run by the reference virtual environment's python, from the repository root:

    /tmp/bench-reference-venv/bin/python -m bench.reference_server --port 8001
    /tmp/bench-reference-venv/bin/python -m bench.reference_server --port 8001 \\
        --agent bench.relay_agents:RelayAgent --name relay

DefaultServer.run() takes a host and a port only: uvicorn's defaults otherwise
(uvloop and httptools when installed, info-level logs with one line per request).
"""

from __future__ import annotations

import argparse
import importlib
import os

os.environ["BENCH_FRAMEWORK"] = "sentient_agent_framework"

from sentient_agent_framework import DefaultServer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--agent", default="bench.agent:BenchAgent", help="module:class of the agent to serve")
    parser.add_argument("--name", default="bench", help="the agent's name")
    args = parser.parse_args()
    module, _, cls = args.agent.partition(":")
    agent_class = getattr(importlib.import_module(module), cls)
    DefaultServer(agent_class(args.name)).run(host=args.host, port=args.port)


if __name__ == "__main__":
    main()
