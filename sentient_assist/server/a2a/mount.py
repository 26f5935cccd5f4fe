"""/a2a and the agent card in an app, when a2a-sdk is there: found without importing it, so that
the service starts, and an app of yours builds, without the extra."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from fastapi import APIRouter, FastAPI
from fastapi.params import Depends

from sentient_assist.extras import found, install_hint, missing
from sentient_assist.server.assist import Assist
from sentient_assist.server.settings import Settings

logger = logging.getLogger("sentient_assist.server")


def sdk_missing(settings: Settings) -> str | None:
    """Why the A2A face cannot be served here (no a2a-sdk 1.x with its HTTP server, or no redis
    client for ASSIST_REDIS_URL), or None when it can."""
    needs = "a2a-sdk 1.x with its HTTP server (a2a-sdk[http-server])"
    problem = missing("a2a", needs=needs, extra="a2a", distribution="a2a-sdk", major=1)
    if problem is None and not found("sse_starlette"):
        problem = f"it needs {needs}: {install_hint('a2a')}"
    if problem is None and settings.redis_url is not None and not found("redis"):
        problem = f"ASSIST_REDIS_URL is set, and its tasks need the redis package: {install_hint('a2a')}"
    return problem


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
