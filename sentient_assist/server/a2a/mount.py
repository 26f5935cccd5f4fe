"""/a2a and the agent card in an app, when a2a-sdk is there: found without importing it, so that
the service starts, and an app of yours builds, without the extra."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import logging
from collections.abc import Sequence

from fastapi import APIRouter, FastAPI
from fastapi.params import Depends

from sentient_assist.server.assist import Assist
from sentient_assist.server.settings import Settings

EXTRA = "pip install 'sentient-assist[a2a]'"

logger = logging.getLogger("sentient_assist.server")


def _found(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def sdk_missing(settings: Settings) -> str | None:
    """Why the A2A face cannot be served here (no a2a-sdk 1.x with its HTTP server, or no redis
    client for ASSIST_REDIS_URL), or None when it can."""
    if not _found("a2a") or not _found("sse_starlette"):
        return f"it needs a2a-sdk 1.x with its HTTP server (a2a-sdk[http-server]): {EXTRA}"
    try:
        version = importlib.metadata.version("a2a-sdk")
    except importlib.metadata.PackageNotFoundError:
        version = "1."  # a checkout: taken as it is
    if not version.startswith("1."):
        return f"it needs a2a-sdk 1.x, not {version}: {EXTRA}"
    if settings.redis_url is not None and not _found("redis"):
        return f"ASSIST_REDIS_URL is set, and its tasks need the redis package: {EXTRA}"
    return None


def add_a2a(
    app: FastAPI | APIRouter,
    assist: Assist,
    settings: Settings,
    a2a_path: str,
    *,
    prefix: str = "",
    dependencies: Sequence[Depends] = (),
    required: bool = True,
) -> None:
    """`POST {prefix}{a2a_path}` and `GET {prefix}/.well-known/agent-card.json`: the agent of
    `assist` as an A2A agent, under its keys and limits. Without the SDK: ImportError naming the
    extra when `required`, else one log line and no route."""
    missing = sdk_missing(settings)
    if missing is not None:
        if required:
            raise ImportError(f"The A2A face ({a2a_path}) is not served: {missing}")
        logger.info("%s is not served: %s", a2a_path, missing)
        return
    from sentient_assist.server.a2a.face import A2AFace

    face = A2AFace(assist, settings, a2a_path)
    app.include_router(face.router(), prefix=prefix, dependencies=list(dependencies))
