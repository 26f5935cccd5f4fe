"""Tracing of the service: whether it is on (decided once, when the app is made), the provider
from the standard OTEL_* environment, and the HTTP server span of each request to a face.

Off (no OTEL_EXPORTER_OTLP_ENDPOINT / OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, no provider given):
`tracing_for()` returns None, no middleware is added, and OpenTelemetry is never imported.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from sentient_assist.runtime.errors import SettingsError
from sentient_assist.server.request_id import STATE_REQUEST_ID
from sentient_assist.tracing import reset_tracing, set_tracing

if TYPE_CHECKING:
    from sentient_assist.runtime.tracing import Tracing

INSTALL_HINT = "pip install 'sentient-assist[otel]'"
_ENDPOINTS = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
# The faces whose requests get a server span: the agent's runs. Probes, docs and metrics do not.
TRACED_PATHS = ("/assist", "/v1/chat/completions", "/mcp", "/agui", "/a2a")


def tracing_configured() -> bool:
    """Whether the environment asks for traces: an OTLP endpoint set, and the SDK not disabled."""
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    if os.environ.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "none":
        return False
    return any(os.environ.get(name, "").strip() for name in _ENDPOINTS)


def check_tracing_installed(*, exporter: bool = True) -> None:
    """SettingsError, one line naming the extra, when tracing is asked for (`exporter`: by the
    environment's OTLP endpoint) and OpenTelemetry, or its SDK and OTLP exporter, is missing:
    `assist serve` says so before it starts."""
    try:
        import sentient_assist.runtime.tracing  # noqa: F401
    except ImportError as exc:
        raise SettingsError(
            f"tracing needs OpenTelemetry ({exc.name or 'opentelemetry'} is missing): {INSTALL_HINT}"
        ) from None
    if exporter:
        try:
            import opentelemetry.exporter.otlp.proto.http.trace_exporter
            import opentelemetry.sdk.trace  # noqa: F401
        except ImportError as exc:
            raise SettingsError(
                f"OTEL_EXPORTER_OTLP_ENDPOINT is set, but the OpenTelemetry SDK or its OTLP exporter "
                f"is not installed ({exc.name or 'opentelemetry'} is missing): {INSTALL_HINT}"
            ) from None


def tracing_for(tracer_provider: Any = None) -> Tracing | None:
    """The app's Tracing: of `tracer_provider` if given; else, when the environment sets an OTLP
    endpoint, of a TracerProvider the SDK builds from OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES and
    OTEL_TRACES_SAMPLER, exporting over OTLP/HTTP through a BatchSpanProcessor (bounded queue,
    OTEL_BSP_*: a receiver that is down or slow drops spans, never slows a stream). Else None."""
    if tracer_provider is None and not tracing_configured():
        return None
    check_tracing_installed(exporter=tracer_provider is None)
    from sentient_assist.runtime.tracing import Tracing

    if tracer_provider is None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        provider = TracerProvider()  # its resource and sampler from the OTEL_* environment
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        return Tracing(provider, owned=True)
    return Tracing(tracer_provider)


def _traced(path: str) -> str | None:
    """The route a traced path is, else None."""
    for route in TRACED_PATHS:
        if path == route or path.startswith(route + "/"):
            return route
    return None


class TracingMiddleware:
    """The HTTP server span of each request to a face (/assist and its runs, /v1/chat/completions,
    /mcp, /agui, /a2a), its parent the request's W3C `traceparent` (and `tracestate`) when it has
    one; and the app's tracing made current for the request, so its run, model and tool calls
    make their spans. Inside the access log's middleware: the request id is known. Never records
    a header's value."""

    def __init__(self, app: ASGIApp, tracing: Tracing) -> None:
        self.app = app
        self.tracing = tracing

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        route = _traced(scope["path"]) if scope["type"] == "http" else None
        if route is None:
            await self.app(scope, receive, send)
            return
        from opentelemetry import trace
        from opentelemetry.propagate import extract
        from opentelemetry.trace import SpanKind, Status, StatusCode

        carrier: dict[str, str] = {}
        for key, value in scope.get("headers", ()):
            if key in (b"traceparent", b"tracestate"):
                carrier[key.decode("latin-1")] = value.decode("latin-1")
        method = scope.get("method", "POST")
        span = self.tracing.tracer.start_span(
            f"{method} {route}",
            context=extract(carrier),
            kind=SpanKind.SERVER,
            attributes={"http.request.method": method, "http.route": route, "url.path": scope["path"]},
        )
        status: int | None = None

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        token = set_tracing(self.tracing)
        failure: str | None = None
        try:
            with trace.use_span(span, end_on_exit=False, record_exception=False, set_status_on_exception=False):
                await self.app(scope, receive, send_status)
        except BaseException as exc:
            failure = type(exc).__qualname__
            raise
        finally:
            reset_tracing(token)
            request_id = scope.get("state", {}).get(STATE_REQUEST_ID)
            if request_id:
                span.set_attribute("sentient.request_id", request_id)
            if status is not None:
                span.set_attribute("http.response.status_code", status)
            if failure is not None or status is None:
                span.set_attribute("error.type", failure or "no_response")
                span.set_status(Status(StatusCode.ERROR, failure or "no response"))
            elif status >= 500:
                span.set_attribute("error.type", str(status))
                span.set_status(Status(StatusCode.ERROR))
            span.end()


def tracing_dependency(tracing: Tracing) -> Any:
    """For add_routes() in an app of yours: a dependency making the app's tracing current for the
    request (its runs, model and tool calls make spans; the HTTP span is your app's own)."""

    async def current() -> None:
        set_tracing(tracing)

    return current
