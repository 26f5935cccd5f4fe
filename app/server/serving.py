"""How uvicorn runs the service: the options `python -m app serve` and DefaultServer share."""

from __future__ import annotations

from typing import Any

from app.server.logs import log_config
from app.server.protocol import BoundedHttpToolsProtocol
from app.server.settings import Settings

# After the grace, the open streams end themselves (app/server/open_streams.py) and cut off
# writers stuck on clients that do not read; uvicorn's own deadline is the backstop after that.
BACKSTOP_SECONDS = 5


def uvicorn_options(settings: Settings) -> dict[str, Any]:
    """uvicorn.run's keyword arguments for `settings`, but the app and its host and port."""
    return {
        "log_config": log_config(settings.log_format, settings.log_level),
        "access_log": False,  # ours logs each request, with its request id, and never a query string
        "http": BoundedHttpToolsProtocol,
        "timeout_graceful_shutdown": int(settings.shutdown_grace) + BACKSTOP_SECONDS,
    }
