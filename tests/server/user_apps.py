"""FastAPI apps written the way users of the service write them, for tests/server/test_fastapi_app.py.

Each is an app factory: `uvicorn --factory tests.server.user_apps:NAME`. The agent is the one
ASSIST_AGENT names.
"""

from __future__ import annotations

from collections import Counter

from fastapi import Depends, FastAPI, Header, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from sentient_assist import add_routes, create_app


class CountingMiddleware:
    """A pure ASGI middleware: counts requests by method and path, and marks each response."""

    def __init__(self, app: ASGIApp, counts: Counter[str]) -> None:
        self.app = app
        self.counts = counts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        self.counts[f"{scope['method']} {scope['path']}"] += 1

        async def marked(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), (b"x-pure-middleware", b"seen")]}
            await send(message)

        await self.app(scope, receive, marked)


async def mark_response(request: Request, call_next: RequestResponseEndpoint) -> Response:
    response = await call_next(request)
    response.headers["x-base-middleware"] = "seen"
    return response


def _counts_route(app: FastAPI, counts: Counter[str]) -> None:
    @app.get("/counted")
    async def counted() -> dict[str, int]:
        return dict(counts)

    if not any(getattr(route, "path", None) == "/healthz" for route in app.routes):

        @app.get("/healthz")
        async def healthz() -> dict[str, str]:
            return {"status": "mine"}


def with_middleware() -> FastAPI:
    """create_app(), then a pure ASGI middleware and a BaseHTTPMiddleware added to it."""
    app = create_app()
    counts: Counter[str] = Counter()
    app.add_middleware(BaseHTTPMiddleware, dispatch=mark_response)
    app.add_middleware(CountingMiddleware, counts=counts)
    _counts_route(app, counts)
    return app


class Teapot(Exception):
    pass


async def no_blocked_header(x_block: str | None = Header(default=None)) -> None:
    if x_block is not None:
        raise HTTPException(403, "blocked by the app's dependency")


async def route_header(x_route: str | None = Header(default=None)) -> None:
    if x_route == "refuse":
        raise HTTPException(403, "refused by the route's dependency")
    if x_route == "teapot":
        raise Teapot()


def with_dependencies() -> FastAPI:
    """A user's app with an app-level dependency and a handler of its own exception; /assist
    added under /bots/showcase with a route-level dependency."""
    app = FastAPI(dependencies=[Depends(no_blocked_header)])
    counts: Counter[str] = Counter()
    app.add_middleware(CountingMiddleware, counts=counts)
    _counts_route(app, counts)

    @app.exception_handler(Teapot)
    async def teapot(request: Request, exc: Teapot) -> JSONResponse:
        return JSONResponse({"detail": "short and stout"}, status_code=418)

    add_routes(app, path="/bots/showcase", dependencies=[Depends(route_header)])
    return app


def with_validation_handler() -> FastAPI:
    """create_app() with the user's own handler of validation errors."""
    app = create_app()

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse({"mine": True, "errors": len(exc.errors())}, status_code=400)

    return app


def mounted() -> FastAPI:
    """The service mounted under /agent in a bigger app."""
    outer = FastAPI()

    @outer.get("/")
    async def home() -> dict[str, str]:
        return {"app": "outer"}

    @outer.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "outer"}

    outer.mount("/agent", create_app())
    return outer


def included() -> FastAPI:
    """The service's routes included in another app (its router, without its middleware)."""
    outer = FastAPI()
    outer.include_router(create_app().router)
    return outer
