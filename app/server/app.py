"""create_app(): the ASGI application, with its agent resolved once."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.routing import get_route_path
from starlette.types import ASGIApp, Receive, Scope, Send

from app.registry import load_agent
from app.runtime.agent import AbstractAgent
from app.server import metrics
from app.server.access_log import AccessLogMiddleware
from app.server.assist import ASSIST_PATH, AssistEndpoint
from app.server.auth import BearerAuthMiddleware, BearerKeys
from app.server.limits import StreamGate
from app.server.logs import configure_logging
from app.server.request_id import REQUEST_ID_HEADER
from app.server.routes import router
from app.server.settings import Settings, load_settings
from app.server.validation import validation_detail
from app.version import __version__


class Service(FastAPI):
    """FastAPI for the probes, /metrics and the OpenAPI docs; POST /assist goes straight to its
    endpoint, which applies the same key, limits and logging itself (see app/server/assist.py)."""

    assist: ASGIApp

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # A plain coroutine function, as every ASGI server expects to find (some ask asyncio,
        # some inspect); under /assist it holds this one small frame above the endpoint's.
        if scope["type"] == "http" and scope["method"] == "POST" and get_route_path(scope) == ASSIST_PATH:
            await self.assist(scope, receive, send)
        else:
            await super().__call__(scope, receive, send)


def create_app(settings: Settings | None = None, agent: AbstractAgent | None = None) -> Service:
    """The service for `agent`, or for the agent `ASSIST_AGENT` names."""
    settings = settings or load_settings()
    configure_logging(settings.log_format, settings.log_level)
    agent = agent or load_agent(settings.agent)
    app = Service(
        title="Sentient assist service",
        version=__version__,
        description=f"Serves the agent **{agent.name}** to Sentient Chat over `POST /assist`.",
    )
    app.state.settings = settings
    app.state.agent = agent
    keys = BearerKeys([key.get_secret_value() for key in settings.api_keys])
    gate = StreamGate(settings.max_streams, on_change=metrics.change_open_streams)
    app.assist = AssistEndpoint(agent, settings, keys, gate)
    app.include_router(router)
    app.add_exception_handler(RequestValidationError, _validation_error)
    # Added innermost first: a request meets the access log, CORS, auth, then the routes.
    app.add_middleware(BearerAuthMiddleware, keys=keys)
    if settings.cors_origins:
        cors = dict(
            allow_origins=settings.cors_origins,
            allow_methods=["GET", "POST", "OPTIONS"],
            allow_headers=["Authorization", "Content-Type", REQUEST_ID_HEADER],
            expose_headers=[REQUEST_ID_HEADER],
            max_age=600,
        )
        app.add_middleware(CORSMiddleware, **cors)
        app.assist = CORSMiddleware(app.assist, **cors)
    app.add_middleware(AccessLogMiddleware)
    return app


async def _validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
    """422 naming each bad field; a body that is not a JSON object says so plainly."""
    return JSONResponse(status_code=422, content={"detail": validation_detail(exc.errors())})
