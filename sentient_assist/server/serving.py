"""How uvicorn runs the service: the options `assist serve` and DefaultServer share."""

from __future__ import annotations

from typing import Any

from sentient_assist.server.logs import log_config
from sentient_assist.server.protocol import BoundedHttpToolsProtocol
from sentient_assist.server.settings import Settings

# After the grace, the open streams end themselves (sentient_assist/server/open_streams.py) and cut off
# writers stuck on clients that do not read; uvicorn's own deadline is the backstop after that.
BACKSTOP_SECONDS = 5


def uvicorn_options(settings: Settings) -> dict[str, Any]:
    """uvicorn.run's keyword arguments for `settings`, but the app and its host and port."""
    return {
        "log_config": log_config(settings.log_format, settings.log_level),
        "access_log": False,  # ours logs each request, with its request id, and never a query string
        "http": BoundedHttpToolsProtocol,  # its connection limits: the served app's own Settings (protocol.py)
        "timeout_keep_alive": settings.keep_alive_timeout,  # also the deadline after an answer sent before its body
        "timeout_graceful_shutdown": int(settings.shutdown_grace) + BACKSTOP_SECONDS,
    }
