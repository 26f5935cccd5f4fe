"""create_app(): the service as a FastAPI app; add_routes(): POST /assist in an app of your own."""

from __future__ import annotations

import asyncio
import gc
import ipaddress
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

from fastapi import APIRouter, FastAPI
from fastapi.exceptions import RequestValidationError
from fastapi.params import Depends
from starlette.middleware.cors import CORSMiddleware

from sentient_assist.registry import load_agent
from sentient_assist.runtime.agent import AbstractAgent
from sentient_assist.server.access_log import AccessLogMiddleware
from sentient_assist.server.faces import FACE_PATHS, add_face, check_faces
from sentient_assist.server.head_start import HeadStartMiddleware
from sentient_assist.server.logs import configure_logging
from sentient_assist.server.playground import add_playground
from sentient_assist.server.redis_policy import check_eviction_policy
from sentient_assist.server.request_id import REQUEST_ID_HEADER
from sentient_assist.server.routes import docs_router, probes, swagger_ui_router
from sentient_assist.server.service import Service
from sentient_assist.server.settings import Settings, load_settings
from sentient_assist.server.tracing import TracingMiddleware, tracing_dependency, tracing_for
from sentient_assist.server.validation import validation_error_handler
from sentient_assist.version import __version__

logger = logging.getLogger("sentient_assist.server")


def create_app(
    settings: Settings | None = None,
    agent: AbstractAgent | None = None,
    *,
    faces: Sequence[str] | None = None,
    tracer_provider: Any = None,
) -> FastAPI:
    """The service for `agent`, or for the agent `ASSIST_AGENT` names, over `faces` (else the
    ones ASSIST_FACES names: server/faces.py); a face whose extra is missing is a SettingsError
    naming the extra.

    A FastAPI app like any other: add middleware, dependencies and exception handlers to it,
    or mount it in another app. Its middleware, outermost first: the head start (a request waits
    for the runs still starting: sentient_assist/server/head_start.py), the access log (and the
    request id), CORS when ASSIST_CORS_ORIGINS is set, the tracing of runs when on, then FastAPI's own.

    Traces (docs/observability.md) are exported when OTEL_EXPORTER_OTLP_ENDPOINT is set, or to
    `tracer_provider` (an OpenTelemetry TracerProvider) when given; else tracing is off, free.
    """
    settings = settings or load_settings()
    configure_logging(settings.log_format, settings.log_level)
    agent = agent or load_agent(settings.agent, settings.agents_dir)
    app = FastAPI(
        title="Sentient assist service",
        version=__version__,
        description=f"Serves the agent **{agent.name}** to Sentient Chat over `POST /assist`.",
        docs_url=None,  # served by docs_router, behind the key
        redoc_url=None,
        openapi_url=None,
        lifespan=_collector_skips_startup,
    )
    app.state.settings = settings
    app.state.agent = agent
    app.state.tracing = tracing_for(tracer_provider)  # decided once: None when off
    service = Service(agent, settings)
    served = list(settings.faces if faces is None else faces)
    check_faces(served, settings)
    if settings.redis_url is not None:  # before anything is kept there: a Redis that may evict it is refused
        check_eviction_policy(settings.redis_url.get_secret_value())
    app.state.service = service  # its faces' keys and limits: a face of your own is built on it
    app.state.runs = service.runs  # resumable runs (ASSIST_DETACH_GRACE > 0), else None
    app.state.faces = {name: FACE_PATHS[name] for name in served}
    for name in served:
        if name != "playground":
            add_face(app, service, name, FACE_PATHS[name])
    app.include_router(probes)
    app.include_router(docs_router(service.keys))
    app.include_router(swagger_ui_router())
    if "playground" in served:
        add_playground(app, agent, service.keys)
    app.add_exception_handler(RequestValidationError, validation_error_handler)
    # Added innermost first: a request meets the access log, then CORS, then the routes.
    if settings.cors_origins:
        # Resumable runs on: a page of another origin may read Assist-Run, resume and stop (else as ever).
        resumable = service.runs is not None
        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.cors_origins,
            allow_methods=["GET", "POST", "OPTIONS", *(["DELETE"] if resumable else [])],
            allow_headers=[
                "Authorization",
                "Content-Type",
                REQUEST_ID_HEADER,
                *(["Last-Event-ID"] if resumable else []),
            ],
            expose_headers=[REQUEST_ID_HEADER, *(["Assist-Run"] if resumable else [])],
            max_age=600,
        )
    if app.state.tracing is not None:
        app.add_middleware(TracingMiddleware, tracing=app.state.tracing)
    app.add_middleware(AccessLogMiddleware)
    # Outermost of ours: a request waits for the runs still starting before any middleware's work.
    app.add_middleware(HeadStartMiddleware, head_start=service.streams.head_start)
    return app


@asynccontextmanager
async def _collector_skips_startup(app: FastAPI) -> AsyncIterator[None]:
    """What exists when the service starts (modules, the app, the agent) lives as long as the
    process: frozen, the garbage collector's full passes under load read only what requests
    made, a few times faster, and a pause that every open stream waits out (bench/README.md).
    At shutdown, the MCP servers' sessions its agents opened are closed (their processes stopped),
    and the spans still queued are exported."""
    gc.freeze()
    agent = getattr(app.state, "agent", None)
    faces = getattr(app.state, "faces", {})
    for name, path in faces.items():
        logger.info("serving %s at %s (face %s)", getattr(agent, "name", "?"), path, name)
    settings = getattr(app.state, "settings", None)
    if "a2a" in faces and settings is not None and not settings.public_url and not _loopback(settings.host):
        logger.warning(
            "ASSIST_PUBLIC_URL is not set: the A2A agent card names the address this process listens on (%s); "
            "behind a proxy or a load balancer set it to the URL clients reach",
            settings.host,
        )
    runs = getattr(app.state, "runs", None)
    if runs is not None:  # connect to its Redis now: the log says at once whether runs are resumable
        await runs.start()
    try:
        yield
    finally:
        if runs is not None:
            await runs.close()
        if agent is not None:
            await agent.aclose()  # what the agent holds open (its MCP servers' sessions), closed by its owner
        tracing = getattr(app.state, "tracing", None)
        if tracing is not None:  # the last spans exported: uvicorn's exit by signal skips the SDK's atexit
            await asyncio.to_thread(tracing.close)


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def add_routes(
    app: FastAPI | APIRouter,
    agent: AbstractAgent | None = None,
    *,
    path: str = "",
    dependencies: Sequence[Depends] = (),
    settings: Settings | None = None,
    openai_prefix: str | None = None,
    mcp_path: str | None = None,
    agui_path: str | None = None,
    a2a_path: str | None = None,
    tracer_provider: Any = None,
) -> None:
    """Add `POST {path}/assist` for `agent` (else the agent ASSIST_AGENT names) to an app of yours.

    `dependencies` run for it, after your app's own; your middleware and exception handlers
    apply to it as to any of your routes. It brings the key check, the stream and body
    limits, keepalives, the time limit and the shutdown of the service (from `settings`,
    else the environment), and not the service's middleware: no access log or X-Request-ID
    echo, no CORS and no 422 wording of its own; your app's apply.

    With `openai_prefix` (say "/v1"), also the OpenAI-compatible face there:
    `POST {path}{openai_prefix}/chat/completions` and `GET {path}{openai_prefix}/models`
    (docs/openai.md), under the same keys and limits. Off by default: adding /assist to an
    app never claims its /v1 paths.

    With `mcp_path` (say "/mcp"), also `POST {path}{mcp_path}`: the agent as an MCP server
    (streamable HTTP, stateless; docs/mcp.md), under the same keys and limits; its session
    manager runs in your app's lifespan. It needs the `mcp` extra (SettingsError naming it).

    With `agui_path` (say "/agui"), also `POST {path}{agui_path}`: the agent as an AG-UI backend
    (CopilotKit, @ag-ui/client; docs/agui.md), under the same keys and limits. It needs the
    `agui` extra (SettingsError naming it).

    With `a2a_path` (say "/a2a"), also `POST {path}{a2a_path}` and its agent card at
    `GET {path}/.well-known/agent-card.json`: the agent as an A2A agent (docs/a2a.md), under
    the same keys and limits. It needs the `a2a` extra (SettingsError naming it).

    With `tracer_provider` (or OTEL_EXPORTER_OTLP_ENDPOINT set), its runs, model and tool calls
    make OpenTelemetry spans, children of your app's request span if it makes one.
    """
    settings = settings or load_settings()
    tracing = tracing_for(tracer_provider)
    if tracing is not None:
        dependencies = [*dependencies, Depends(tracing_dependency(tracing))]
    agent = agent or load_agent(settings.agent, settings.agents_dir)
    service = Service(agent, settings)
    where = {
        "assist": FACE_PATHS["assist"],
        "openai": openai_prefix,
        "mcp": mcp_path,
        "agui": agui_path,
        "a2a": a2a_path,
    }
    chosen = {name: face_path for name, face_path in where.items() if face_path is not None}
    check_faces(list(chosen), settings)
    if settings.redis_url is not None:
        check_eviction_policy(settings.redis_url.get_secret_value())
    for name, face_path in chosen.items():
        add_face(app, service, name, face_path, prefix=path, dependencies=dependencies)
    app.include_router(APIRouter(lifespan=_closing(agent)))  # merged into your app's lifespan


def _closing(agent: AbstractAgent) -> Callable[[object], AbstractAsyncContextManager[None]]:
    """A lifespan that closes what `agent` holds open (its MCP servers' sessions) at shutdown."""

    @asynccontextmanager
    async def lifespan(app: object) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await agent.aclose()

    return lifespan
