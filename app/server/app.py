"""create_app(): the ASGI application, with its agent resolved once."""

from __future__ import annotations

import asyncio
import inspect
import sys
from typing import Any, Awaitable, Callable

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


def _mark_coroutine_function(func: Callable[..., Any]) -> Callable[..., Any]:
    """Mark `func`, which returns an awaitable, as a coroutine function: ASGI servers tell
    ASGI 3 apps from ASGI 2 apps by asking whether `__call__` is one."""
    if sys.version_info >= (3, 12):
        return inspect.markcoroutinefunction(func)
    func._is_coroutine = asyncio.coroutines._is_coroutine  # type: ignore[attr-defined]  # what 3.11's asyncio checks
    return func


class Service(FastAPI):
    """FastAPI for the probes, /metrics and the OpenAPI docs; POST /assist goes straight to its
    endpoint, which applies the same key, limits and logging itself (see app/server/assist.py)."""

    assist: ASGIApp

    @_mark_coroutine_function
    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:  # type: ignore[override]
        # Not `async def`: the request's coroutine is the endpoint's or FastAPI's own, with no
        # frame of ours above it for the life of a stream.
        if scope["type"] == "http" and scope["method"] == "POST" and get_route_path(scope) == ASSIST_PATH:
            return self.assist(scope, receive, send)
        return super().__call__(scope, receive, send)


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
