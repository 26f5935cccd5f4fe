"""The spans of runs, model calls and tool calls, named and attributed as the OpenTelemetry GenAI
semantic conventions say (v1.37, development status; docs/observability.md).

Imported only when tracing is on (an app's Tracing is made by sentient_assist/server/tracing.py):
with tracing off, nothing here is loaded and no span object is made.

A span is started and ended in one task. `invoke_agent` is current (attached) only inside the
agent's own task, for the whole of it; `chat` is held by the model's stream without ever being
attached (so a stream closed from elsewhere never detaches a context it did not attach), and its
context is given explicitly to the provider's request headers.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Awaitable, Callable, Mapping
from typing import Protocol, TypeVar

from opentelemetry import trace
from opentelemetry.propagate import inject
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer
from opentelemetry.util.types import AttributeValue

from sentient_assist.protocol.json_value import JSONObject

SCHEMA_URL = "https://opentelemetry.io/schemas/1.37.0"
CAPTURE_CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
MAX_CAPTURED = 4096  # characters of a prompt, answer, tool arguments or result, when capture is on

Returned = TypeVar("Returned")


class ToolCallOutcome(Protocol):
    """What an `execute_tool` span records of a call's outcome (sentient_assist.llm.tools.ToolOutcome)."""

    @property
    def error(self) -> str | None: ...

    @property
    def model_content(self) -> str: ...


Outcome = TypeVar("Outcome", bound=ToolCallOutcome)


class Tracing:
    """One app's tracer, and whether message content is recorded (off unless the env says true)."""

    __slots__ = ("tracer", "capture_content", "_provider", "_owned")

    # Seconds the last spans may take to export when the app stops.
    FLUSH_SECONDS = 5.0

    def __init__(
        self, provider: trace.TracerProvider, capture_content: bool | None = None, *, owned: bool = False
    ) -> None:
        self._provider = provider
        self._owned = owned  # made from the environment by the app, rather than given to it
        self.tracer: Tracer = provider.get_tracer("sentient_assist", schema_url=SCHEMA_URL)
        if capture_content is None:
            capture_content = os.environ.get(CAPTURE_CONTENT_ENV, "").strip().lower() == "true"
        self.capture_content = capture_content

    def close(self) -> None:
        """At the app's shutdown: export what is still queued. uvicorn ends its process by the
        signal it was stopped with, so the SDK's own atexit flush never runs: without this, the
        spans of the last seconds before a SIGTERM (the batch processor's schedule) are lost.
        A provider the app made is shut down; one it was given is only flushed (its owner's)."""
        if self._owned:
            shutdown = getattr(self._provider, "shutdown", None)
            if shutdown is not None:
                shutdown()
            return
        flush = getattr(self._provider, "force_flush", None)
        if flush is not None:
            flush(int(self.FLUSH_SECONDS * 1000))

    # invoke_agent ---------------------------------------------------------------------------

    async def run_agent(
        self,
        work: Awaitable[Returned],
        agent: str,
        request_id: str,
        why_cancelled: Callable[[], str],
        prompt: str | None,
    ) -> Returned:
        """Run the agent's coroutine inside `invoke_agent {agent}`, started and ended in this task.
        `why_cancelled()` says what a cancellation was: the run's time limit ("time_limit"), its
        client gone ("disconnected"), the server's shutdown ("shutdown"), ... or "cancelled"."""
        span = self.tracer.start_span(
            f"invoke_agent {agent}",
            kind=SpanKind.INTERNAL,
            attributes={
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": agent,
                "sentient.request_id": request_id,
            },
        )
        if self.capture_content and prompt:
            span.set_attribute("gen_ai.input.messages", input_messages([("user", prompt)]))
        outcome = "completed"
        try:
            with trace.use_span(span, end_on_exit=False, record_exception=False, set_status_on_exception=False):
                return await work
        except asyncio.CancelledError:
            outcome = why_cancelled()
            span.set_status(Status(StatusCode.ERROR, outcome))
            span.set_attribute("error.type", outcome)
            raise
        except BaseException as exc:
            outcome = "error"
            span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
            span.set_attribute("error.type", type(exc).__qualname__)
            raise
        finally:
            span.set_attribute("sentient.run.outcome", outcome)
            if outcome == "completed":
                span.set_status(Status(StatusCode.OK))
            span.end()

    # chat -----------------------------------------------------------------------------------

    def start_chat(self, model: str, provider: str, server_address: str | None, server_port: int | None) -> Span:
        """`chat {model}`, a child of the current span, not attached: its holder ends it."""
        attributes: dict[str, AttributeValue] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": provider,
            "gen_ai.request.model": model,
        }
        if server_address:
            attributes["server.address"] = server_address
        if server_port:
            attributes["server.port"] = server_port
        return self.tracer.start_span(f"chat {model}", kind=SpanKind.CLIENT, attributes=attributes)

    @staticmethod
    def headers_for(span: Span, headers: Mapping[str, str]) -> dict[str, str]:
        """`headers` and the W3C traceparent (tracestate) of `span`."""
        carrier = dict(headers)
        inject(carrier, context=trace.set_span_in_context(span))
        return carrier

    # execute_tool ---------------------------------------------------------------------------

    def start_tool(self, name: str, description: str, call_id: str | None) -> Span:
        attributes: dict[str, AttributeValue] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.type": "function",
        }
        if description:
            attributes["gen_ai.tool.description"] = _bounded(description, 300)
        if call_id:
            attributes["gen_ai.tool.call.id"] = call_id
        return self.tracer.start_span(f"execute_tool {name}", kind=SpanKind.INTERNAL, attributes=attributes)

    async def run_tool(self, work: Awaitable[Outcome], span: Span, arguments: str) -> Outcome:
        """Await a tool call's outcome (a ToolOutcome) inside its span, current for the call."""
        if self.capture_content:
            span.set_attribute("gen_ai.tool.call.arguments", _bounded(arguments))
        try:
            with trace.use_span(span, end_on_exit=False, record_exception=False, set_status_on_exception=False):
                outcome = await work
        except asyncio.CancelledError:
            end_failed(span, "cancelled")
            raise
        except BaseException as exc:
            end_failed(span, type(exc).__qualname__)
            raise
        if outcome.error is not None:
            # The kind of failure only: the error's text is the user's, and the log's.
            end_failed(span, _tool_error_type(outcome.error), "the tool call failed")
        else:
            if self.capture_content:
                span.set_attribute("gen_ai.tool.call.result", _bounded(outcome.model_content))
            end_ok(span)
        return outcome


def _tool_error_type(error: str) -> str:
    """A low-cardinality error.type for a failed tool call, from its message's kind."""
    if error.startswith("the tool failed ("):
        return error[len("the tool failed (") :].rstrip(")") or "tool_error"
    if error.startswith("the tool did not finish within"):
        return "timeout"
    if error.startswith(("invalid arguments", "the arguments")):
        return "invalid_arguments"
    return "tool_error"


def inject_current(headers: dict[str, str]) -> None:
    """Add the current span's traceparent (and tracestate) to `headers`."""
    inject(headers)


def add_event(name: str, attributes: Mapping[str, AttributeValue]) -> None:
    """An event on the current span (the agent's `invoke_agent`), when it records."""
    span = trace.get_current_span()
    if span.is_recording():
        span.add_event(name, dict(attributes))


def end_failed(span: Span, error_type: str, description: str | None = None) -> None:
    span.set_attribute("error.type", error_type)
    span.set_status(Status(StatusCode.ERROR, description or error_type))
    span.end()


def end_ok(span: Span) -> None:
    span.set_status(Status(StatusCode.OK))
    span.end()


def input_messages(messages: list[tuple[str, str]]) -> str:
    """gen_ai.input.messages as the conventions write it (JSON: role and text parts), each text
    and the whole bounded: the last messages kept when they are too many."""
    kept: list[JSONObject] = []
    size = 0
    for role, text in reversed(messages):
        part = _bounded(text or "")
        size += len(part) + 50
        if kept and size > 4 * MAX_CAPTURED:
            break
        kept.append({"role": role, "parts": [{"type": "text", "content": part}]})
    return json.dumps(kept[::-1], ensure_ascii=False)


def output_messages(text: str) -> str:
    """gen_ai.output.messages of a reply's text, bounded."""
    return json.dumps(
        [{"role": "assistant", "parts": [{"type": "text", "content": _bounded(text)}]}], ensure_ascii=False
    )


def _bounded(text: str, limit: int = MAX_CAPTURED) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


bounded = _bounded
