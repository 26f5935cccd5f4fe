"""The service's other routes: GET /healthz, /readyz and /metrics (open, for probes and
scrapers), and the OpenAPI schema and its page (behind the key when keys are set), whose
Swagger UI files the service serves itself (open: they are the same for everyone).

Every GET route takes HEAD too (`get_and_head`), as Starlette's own routes and files do:
load balancers probe with HEAD. The answer is GET's, status and headers; the server sends no
body for a HEAD.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, PlainTextResponse

from sentient_assist.server.auth import BearerKeys
from sentient_assist.server.draining import is_draining
from sentient_assist.server.metrics import metrics_endpoint

OPENAPI_PATH = "/openapi.json"
DOCS_PATH = "/docs"
SWAGGER_UI_PATH = "/docs/swagger-ui"
# Swagger UI's own files, from the fastapi-swagger package (which follows swagger-ui-dist's
# releases): /docs works with no network, where FastAPI's default page loads them from a CDN.
SWAGGER_UI_FILES = {
    "swagger-ui-bundle.js": "text/javascript",
    "swagger-ui.css": "text/css",
    "favicon-32x32.png": "image/png",
}


def get_and_head(router: APIRouter, path: str, endpoint: Callable[..., Any], **options: Any) -> None:
    """GET `path` and HEAD, in `router`: the same answer (the server leaves out a HEAD's body).
    One route takes both methods, so a 405 names both in `Allow`; the schema shows GET alone,
    from a twin route after it that takes GET only and never answers (the first matches every
    GET), rather than a HEAD operation under the same operation id (FastAPI's warning)."""
    in_schema = options.pop("include_in_schema", True)
    router.add_api_route(path, endpoint, methods=["GET", "HEAD"], include_in_schema=False, **options)
    if in_schema:
        router.add_api_route(path, endpoint, methods=["GET"], **options)


async def healthz() -> dict[str, str]:
    return {"status": "ok"}


async def readyz(request: Request) -> JSONResponse:
    if is_draining():
        return JSONResponse({"status": "draining"}, status_code=503)
    # With ASSIST_DETACH_GRACE on: whether new runs are resumable (off while its Redis does not answer).
    runs = getattr(request.app.state, "runs", None)
    if runs is not None:
        return JSONResponse({"status": "ready", "resumable_runs": runs.status()})
    return JSONResponse({"status": "ready"})


probes = APIRouter()
get_and_head(probes, "/healthz", healthz, summary="Liveness: the process answers")
get_and_head(probes, "/readyz", readyz, summary="Readiness: 503 while draining for shutdown")
get_and_head(probes, "/metrics", metrics_endpoint, summary="Prometheus metrics", response_class=PlainTextResponse)


def docs_router(keys: BearerKeys) -> APIRouter:
    """The OpenAPI schema and its page, as FastAPI serves them, but behind the key."""
    router = APIRouter(dependencies=[Depends(keys.require)], include_in_schema=False)

    @router.api_route(OPENAPI_PATH, methods=["GET", "HEAD"])
    async def openapi(request: Request) -> JSONResponse:
        return JSONResponse(request.app.openapi())

    @router.api_route(DOCS_PATH, methods=["GET", "HEAD"])
    async def docs(request: Request) -> HTMLResponse:
        root_path = request.scope.get("root_path", "").rstrip("/")  # mounted under a prefix: the schema is too
        files = root_path + SWAGGER_UI_PATH
        return get_swagger_ui_html(
            openapi_url=root_path + OPENAPI_PATH,
            title=f"{request.app.title} - docs",
            swagger_js_url=f"{files}/swagger-ui-bundle.js",
            swagger_css_url=f"{files}/swagger-ui.css",
            swagger_favicon_url=f"{files}/favicon-32x32.png",
        )

    return router


def swagger_ui_router() -> APIRouter:
    """Swagger UI's files for /docs, open: a browser loads them without the page's key."""
    router = APIRouter(include_in_schema=False)
    folder = Path(str(resources.files("fastapi_swagger.resources")))

    @router.api_route(SWAGGER_UI_PATH + "/{name}", methods=["GET", "HEAD"])
    async def swagger_ui_file(name: str) -> FileResponse:
        media_type = SWAGGER_UI_FILES.get(name)
        if media_type is None:  # only the files named above: no path reaches anything else
            raise HTTPException(404, "no such file")
        # nosniff: a browser runs or styles them only as the type named here, never a guess.
        headers = {"Cache-Control": "public, max-age=86400", "X-Content-Type-Options": "nosniff"}
        return FileResponse(folder / name, media_type=media_type, headers=headers)

    return router
