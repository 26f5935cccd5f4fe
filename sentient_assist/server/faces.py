"""Which faces an app serves, and where: the operator's choice (ASSIST_FACES), never a side
effect of what is installed. A face named whose extra is missing stops the start with one line
naming the extra to install.

    assist      POST /assist (and /assist/runs with resumable runs)    always installed
    openai      /v1/chat/completions, /v1/models                      always installed
    playground  GET /playground                                        always installed
    mcp         POST /mcp                                              the `mcp` extra
    agui        POST /agui                                             the `agui` extra
    a2a         POST /a2a and /.well-known/agent-card.json             the `a2a` extra

The probes (/healthz, /readyz, /metrics) are always served. Each face's module is imported only
when it is served: an app builds without the extras it does not serve.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import get_args

from fastapi import APIRouter, FastAPI
from fastapi.params import Depends

from sentient_assist.extras import found, install_hint, missing
from sentient_assist.runtime.errors import SettingsError
from sentient_assist.server.face import Face
from sentient_assist.server.service import Service
from sentient_assist.server.settings import DEFAULT_FACES, FaceName, Settings

FACES_SETTING = "ASSIST_FACES"
FACE_NAMES: tuple[str, ...] = get_args(FaceName)
__all__ = ["DEFAULT_FACES", "FACE_NAMES", "FACE_PATHS", "add_face", "check_faces", "face_of", "why_not_served"]
# Where each is served, under the app's (or add_routes') prefix.
FACE_PATHS = {
    "assist": "/assist",
    "openai": "/v1",
    "playground": "/playground",
    "mcp": "/mcp",
    "agui": "/agui",
    "a2a": "/a2a",
}


def why_not_served(name: str, settings: Settings) -> str | None:
    """Why face `name` cannot be served here (its extra is missing), or None when it can."""
    if name == "mcp":
        return missing("mcp", needs="the mcp package (the official SDK, 2.x)", extra="mcp", distribution="mcp", major=2)
    if name == "agui":
        return missing(
            "ag_ui", needs="the ag-ui-protocol package (1.x)", extra="agui", distribution="ag-ui-protocol", major=1
        )
    if name == "a2a":
        needs = "a2a-sdk 1.x with its HTTP server (a2a-sdk[http-server])"
        problem = missing("a2a", needs=needs, extra="a2a", distribution="a2a-sdk", major=1)
        if problem is None and not found("sse_starlette"):
            problem = f"it needs {needs}: {install_hint('a2a')}"
        if problem is None and settings.redis_url is not None and not found("redis"):
            problem = f"ASSIST_REDIS_URL is set, and its tasks need the redis package: {install_hint('a2a')}"
        return problem
    return None


def check_faces(names: Sequence[str], settings: Settings) -> None:
    """SettingsError, one line naming the face and the extra to install, for the first face of
    `names` that is unknown or cannot be served here."""
    for name in names:
        if name not in FACE_NAMES:
            raise SettingsError(f"{FACES_SETTING}: {name!r} is not a face; the faces are {', '.join(FACE_NAMES)}")
        problem = why_not_served(name, settings)
        if problem is not None:
            raise SettingsError(f"{FACES_SETTING} names {name}, which cannot be served: {problem}")


def face_of(name: str, service: Service, path: str) -> Face:
    """The adapter of face `name` for `service`'s agent (its module imported now)."""
    if name == "assist":
        from sentient_assist.server.assist import AssistFace

        return AssistFace(service)
    if name == "openai":
        from sentient_assist.server.openai.face import OpenAIFace

        return OpenAIFace(service)
    if name == "mcp":
        from sentient_assist.server.mcp.face import MCPFace

        return MCPFace(service)
    if name == "agui":
        from sentient_assist.server.agui.face import AguiFace

        return AguiFace(service)
    if name == "a2a":
        from sentient_assist.server.a2a.face import A2AFace

        return A2AFace(service, path)
    raise SettingsError(f"{FACES_SETTING}: {name!r} is not a face with routes of its own")


def add_face(
    app: FastAPI | APIRouter,
    service: Service,
    name: str,
    path: str,
    *,
    prefix: str = "",
    dependencies: Sequence[Depends] = (),
) -> None:
    """Face `name` at `{prefix}{path}` in `app`, under `service`'s keys and limits (SettingsError
    naming the extra when it cannot be served here)."""
    check_faces([name], service.settings)
    face = face_of(name, service, path)
    app.include_router(face.router(path), prefix=prefix, dependencies=list(dependencies))
