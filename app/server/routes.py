"""HTTP routes: GET /healthz, /readyz and /metrics; POST /assist as the OpenAPI schema shows it."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse, PlainTextResponse, Response

from app.protocol.request import Request as AssistBody
from app.server.draining import is_draining
from app.server.metrics import metrics_endpoint

router = APIRouter()

_STREAM_DESCRIPTION = """\
A Server-Sent Events stream. Each event is one frame: `event: <event_name>`, one
`data:` line holding the event as compact JSON, and a blank line. Keepalive pings
are comment lines (`: ping`). The last event is always `done`.
"""


@router.post(
    "/assist",
    summary="Ask the agent; stream its answer",
    response_class=Response,  # no JSON schema of its own: `responses` says what the stream is
    responses={
        200: {"description": _STREAM_DESCRIPTION, "content": {"text/event-stream": {}}},
        400: {"description": "The body cannot be parsed at all (not UTF-8, nested past the parser's limits)."},
        401: {"description": "ASSIST_API_KEYS is set and the request has no valid `Authorization: Bearer` key."},
        413: {"description": "The body is larger than ASSIST_MAX_BODY_BYTES."},
        422: {"description": "The body is not a valid request; `detail` names each bad field."},
        503: {"description": "At ASSIST_MAX_STREAMS, or shutting down; see `Retry-After`."},
    },
)
async def assist(body: AssistBody) -> None:
    # Documents POST /assist in the OpenAPI schema. `Service` sends every POST /assist to
    # `AssistEndpoint` before the routes are reached, so this is never called.
    raise RuntimeError("POST /assist is served by AssistEndpoint, ahead of the routes")


@router.get("/healthz", summary="Liveness: the process answers")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz", summary="Readiness: 503 while draining for shutdown")
async def readyz() -> JSONResponse:
    if is_draining():
        return JSONResponse({"status": "draining"}, status_code=503)
    return JSONResponse({"status": "ready"})


router.add_api_route(
    "/metrics", metrics_endpoint, methods=["GET"], summary="Prometheus metrics", response_class=PlainTextResponse
)
