"""The service's other routes: GET /healthz, /readyz and /metrics (open, for probes and
scrapers), and the OpenAPI schema and its page (behind the key when keys are set)."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse

from app.server.auth import BearerKeys
from app.server.draining import is_draining
from app.server.metrics import metrics_endpoint

OPENAPI_PATH = "/openapi.json"
DOCS_PATH = "/docs"

probes = APIRouter()


@probes.get("/healthz", summary="Liveness: the process answers")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@probes.get("/readyz", summary="Readiness: 503 while draining for shutdown")
async def readyz() -> JSONResponse:
    if is_draining():
        return JSONResponse({"status": "draining"}, status_code=503)
    return JSONResponse({"status": "ready"})


probes.add_api_route(
    "/metrics", metrics_endpoint, methods=["GET"], summary="Prometheus metrics", response_class=PlainTextResponse
)


def docs_router(keys: BearerKeys) -> APIRouter:
    """The OpenAPI schema and its page, as FastAPI serves them, but behind the key."""
    router = APIRouter(dependencies=[Depends(keys.require)], include_in_schema=False)

    @router.get(OPENAPI_PATH)
    async def openapi(request: Request) -> JSONResponse:
        return JSONResponse(request.app.openapi())

    @router.get(DOCS_PATH)
    async def docs(request: Request) -> HTMLResponse:
        root_path = request.scope.get("root_path", "").rstrip("/")  # mounted under a prefix: the schema is too
        return get_swagger_ui_html(openapi_url=root_path + OPENAPI_PATH, title=f"{request.app.title} - docs")

    return router
