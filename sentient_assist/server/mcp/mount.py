"""/mcp in an app, when the mcp SDK is there: found without importing it, so that the service
starts, and an app of yours builds, without the extra."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import logging
from collections.abc import Sequence

from fastapi import APIRouter, FastAPI
from fastapi.params import Depends

from sentient_assist.server.assist import Assist

EXTRA = "pip install 'sentient-assist[mcp]'"

logger = logging.getLogger("sentient_assist.server")


def sdk_missing() -> str | None:
    """Why the MCP face cannot be served here (no mcp SDK 2.x), or None when it can."""
    try:
        found = importlib.util.find_spec("mcp") is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        return f"it needs the mcp package (the official SDK, 2.x): {EXTRA}"
    try:
        version = importlib.metadata.version("mcp")
    except importlib.metadata.PackageNotFoundError:
        return None  # an mcp of no known version (a checkout): taken as it is
    if not version.startswith("2."):
        return f"it needs mcp 2.x, not {version}: {EXTRA}"
    return None


def add_mcp(
    app: FastAPI | APIRouter,
    assist: Assist,
    mcp_path: str,
    *,
    prefix: str = "",
    dependencies: Sequence[Depends] = (),
    required: bool = True,
) -> None:
    """POST `{prefix}{mcp_path}`: the agent of `assist` as an MCP server, under its keys and
    limits, its session manager run by the app's lifespan. Without the SDK: ImportError naming
    the extra when `required`, else one log line and no route."""
    missing = sdk_missing()
    if missing is not None:
        if required:
            raise ImportError(f"The MCP face ({mcp_path}) is not served: {missing}")
        logger.info("%s is not served: %s", mcp_path, missing)
        return
    from sentient_assist.server.mcp.face import MCPFace

    app.include_router(MCPFace(assist).router(mcp_path), prefix=prefix, dependencies=list(dependencies))
