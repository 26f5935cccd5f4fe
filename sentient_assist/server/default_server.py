"""DefaultServer: serve one agent the way the 0.3.0 package's scripts do."""

from __future__ import annotations

import uvicorn
from fastapi import FastAPI

from sentient_assist.runtime.agent import AbstractAgent
from sentient_assist.server.app import create_app
from sentient_assist.server.serving import uvicorn_options
from sentient_assist.server.settings import load_settings


class DefaultServer:
    """`DefaultServer(agent).run(host, port)`: the service for one agent object."""

    def __init__(self, agent: AbstractAgent) -> None:
        self._agent = agent
        self._app = create_app(load_settings(agent=agent.name), agent=agent)

    @property
    def app(self) -> FastAPI:
        return self._app

    def run(self, host: str = "0.0.0.0", port: int = 8000) -> None:
        """Serve until SIGTERM or Ctrl-C, as `assist serve` does (its logs, limits and grace)."""
        uvicorn.run(self._app, host=host, port=port, **uvicorn_options(self._app.state.settings))
