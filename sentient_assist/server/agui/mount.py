"""/agui in an app, when ag-ui-protocol is there: found without importing it, so that the
service starts, and an app of yours builds, without the extra."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from fastapi import APIRouter, FastAPI
from fastapi.params import Depends

from sentient_assist.extras import missing
from sentient_assist.server.assist import Assist

logger = logging.getLogger("sentient_assist.server")


def sdk_missing() -> str | None:
    """Why the AG-UI face cannot be served here (no ag-ui-protocol 1.x), or None when it can."""
    return missing(
        "ag_ui", needs="the ag-ui-protocol package (1.x)", extra="agui", distribution="ag-ui-protocol", major=1
    )


def add_agui(
    app: FastAPI | APIRouter,
    assist: Assist,
    agui_path: str,
    *,
    prefix: str = "",
    dependencies: Sequence[Depends] = (),
    required: bool = True,
) -> None:
    """POST `{prefix}{agui_path}`: the agent of `assist` as an AG-UI backend, under its keys and
    limits. Without ag-ui-protocol: ImportError naming the extra when `required`, else one log
    line and no route."""
    missing = sdk_missing()
    if missing is not None:
        if required:
            raise ImportError(f"The AG-UI face ({agui_path}) is not served: {missing}")
        logger.info("%s is not served: %s", agui_path, missing)
        return
    from sentient_assist.server.agui.face import AguiFace

    app.include_router(AguiFace(assist).router(agui_path), prefix=prefix, dependencies=list(dependencies))
