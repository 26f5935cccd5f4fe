"""GET /playground: a page to try the agent in a browser, served from the package's own files.

The page (sentient_assist/server/playground/: HTML, CSS, JavaScript, and the vendored Markdown and SSE
libraries) talks to `POST /assist` as Sentient Chat does; nothing is fetched from elsewhere.
Every response under /playground carries a strict Content-Security-Policy: scripts only from
the service's own files, no inline script, so agent text that slipped past the sanitiser could
still not run. The page and its files hold nothing secret, so they are open even when
ASSIST_API_KEYS is set; the /assist calls the page makes carry the key the person types in,
and config.json names the agent only to a caller with a valid key (as /openapi.json does).
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, RedirectResponse
from fastapi.routing import APIRouter
from starlette.exceptions import HTTPException
from starlette.responses import Response
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

from sentient_assist.runtime.agent import AbstractAgent
from sentient_assist.server.auth import BearerKeys

PLAYGROUND_PATH = "/playground"

# What a page under /playground may do: its own scripts, styles and images, fetch its own
# origin (/assist), nothing inline, nothing framed. Trusted Types: the only HTML the page writes
# goes through DOMPurify's policy.
CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "connect-src 'self'",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
        "require-trusted-types-for 'script'",
        "trusted-types dompurify",
    ]
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Opener-Policy": "same-origin",
    # Revalidated on every load (the ETag makes that cheap): a new version of the service
    # never runs with the page of the last one.
    "Cache-Control": "no-cache",
}


class PlaygroundFiles(StaticFiles):
    """The page's files, each with the security headers; a refusal (404, 405) too."""

    async def get_response(self, path: str, scope: Scope) -> Response:
        try:
            response = await super().get_response(path, scope)
        except HTTPException as exc:
            # StaticFiles raises these, and the app's handler would answer without the headers
            # above: the same JSON body it would send, with them.
            return JSONResponse(
                {"detail": exc.detail}, status_code=exc.status_code, headers={**(exc.headers or {}), **SECURITY_HEADERS}
            )
        response.headers.update(SECURITY_HEADERS)
        return response


def add_playground(app: FastAPI, agent: AbstractAgent, keys: BearerKeys) -> None:
    """GET /playground/ (the page and its files) and /playground/config.json, in `app`."""
    router = APIRouter(include_in_schema=False)

    # GET and HEAD, as the files under the mount answer both.
    @router.api_route(PLAYGROUND_PATH, methods=["GET", "HEAD"])
    async def playground() -> RedirectResponse:
        # The page's URLs are relative (config.json, ../assist), so that it works under a
        # root_path too: they need the trailing slash. A relative Location keeps the prefix.
        return RedirectResponse("playground/", status_code=307, headers=SECURITY_HEADERS)

    # Declared for HEAD too: else a HEAD matches this route only in part, and the mount below,
    # which takes HEAD, answers it as a missing file (404).
    @router.api_route(PLAYGROUND_PATH + "/config.json", methods=["GET", "HEAD"])
    async def config(request: Request) -> JSONResponse:
        """Whether /assist needs a key, whether this request's key is good, and then the agent."""
        body: dict[str, Any] = {"key_required": bool(keys), "key_accepted": True, "agent": None}
        try:
            keys.check(request.headers.get("authorization"))
        except HTTPException:
            body["key_accepted"] = False
        else:
            body["agent"] = {"name": agent.name, "description": agent.description}
        # no-store: the answer depends on the key sent.
        return JSONResponse(body, headers={**SECURITY_HEADERS, "Cache-Control": "no-store"})

    app.include_router(router)
    # Mounted after the routes above, which it would otherwise shadow.
    app.mount(
        PLAYGROUND_PATH,
        PlaygroundFiles(packages=[("sentient_assist.server", "playground")], html=True),
        name="playground",
    )
