"""create_app(): the ASGI application, with its agent resolved once."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.requests import Request

from app.registry import load_agent
from app.runtime.agent import AbstractAgent
from app.server.routes import router
from app.server.settings import Settings, load_settings
from app.version import __version__

_NOT_JSON_HINT = "the body must be a JSON object, sent with Content-Type: application/json"


def create_app(settings: Settings | None = None, agent: AbstractAgent | None = None) -> FastAPI:
    """The service for `agent`, or for the agent `ASSIST_AGENT` names."""
    settings = settings or load_settings()
    agent = agent or load_agent(settings.agent)
    app = FastAPI(
        title="Sentient assist service",
        version=__version__,
        description=f"Serves the agent **{agent.name}** to Sentient Chat over `POST /assist`.",
    )
    app.state.settings = settings
    app.state.agent = agent
    app.include_router(router)
    app.add_exception_handler(RequestValidationError, _validation_error)
    return app


async def _validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
    """422 naming each bad field; a body that is not a JSON object says so plainly."""
    errors = []
    for error in exc.errors():
        loc, kind, msg = list(error.get("loc", ())), error.get("type", ""), error.get("msg", "")
        if kind == "json_invalid":
            reason = (error.get("ctx") or {}).get("error", "")
            msg = f"the body is not valid JSON ({reason})" if reason else "the body is not valid JSON"
        elif loc == ["body"] and kind in ("model_attributes_type", "dict_type", "missing"):
            msg = _NOT_JSON_HINT
        errors.append({"loc": loc, "msg": msg.removeprefix("Value error, "), "type": kind})
    return JSONResponse(status_code=422, content={"detail": errors})
