"""/mcp in an app, when the mcp SDK is there: found without importing it, so that the service
starts, and an app of yours builds, without the extra."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from fastapi import APIRouter, FastAPI
from fastapi.params import Depends

from sentient_assist.extras import missing
from sentient_assist.server.assist import Assist

logger = logging.getLogger("sentient_assist.server")


def sdk_missing() -> str | None:
    """Why the MCP face cannot be served here (no mcp SDK 2.x), or None when it can."""
    return missing("mcp", needs="the mcp package (the official SDK, 2.x)", extra="mcp", distribution="mcp", major=2)


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
