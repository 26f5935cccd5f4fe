"""create_app(): the ASGI application, with its agent resolved once."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request

from app.registry import load_agent
from app.runtime.agent import AbstractAgent
from app.server import metrics
from app.server.access_log import AccessLogMiddleware
from app.server.auth import BearerAuthMiddleware
from app.server.limits import BodyLimitMiddleware, StreamGateMiddleware
from app.server.logs import configure_logging
from app.server.request_id import REQUEST_ID_HEADER
from app.server.routes import router
from app.server.settings import Settings, load_settings
from app.version import __version__

_NOT_JSON_HINT = "the body must be a JSON object, sent with Content-Type: application/json"


def create_app(settings: Settings | None = None, agent: AbstractAgent | None = None) -> FastAPI:
    """The service for `agent`, or for the agent `ASSIST_AGENT` names."""
    settings = settings or load_settings()
    configure_logging(settings.log_format, settings.log_level)
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
    # Added innermost first: a request meets the access log, CORS, auth, the stream
    # gate, the body limit, then the routes.
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.max_body_bytes)
    app.add_middleware(StreamGateMiddleware, max_streams=settings.max_streams, on_change=metrics.change_open_streams)
    app.add_middleware(BearerAuthMiddleware, keys=[key.get_secret_value() for key in settings.api_keys])
    if settings.cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.cors_origins,
            allow_methods=["GET", "POST", "OPTIONS"],
            allow_headers=["Authorization", "Content-Type", REQUEST_ID_HEADER],
            expose_headers=[REQUEST_ID_HEADER],
            max_age=600,
        )
    app.add_middleware(AccessLogMiddleware, agent_name=agent.name)
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
