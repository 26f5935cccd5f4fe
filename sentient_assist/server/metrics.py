"""Prometheus metrics (prometheus-client), and GET /metrics.

With several uvicorn workers, `assist serve --workers N` points
PROMETHEUS_MULTIPROC_DIR at a fresh folder before the workers start, and
/metrics reports the sum over all workers.
"""

from __future__ import annotations

import os
import time

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
    multiprocess,
)
from starlette.requests import Request
from starlette.responses import Response

from sentient_assist.runtime.run import RunStats

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"

disable_created_metrics()  # the *_created series only add noise here

REQUESTS = Counter("assist_http_requests_total", "HTTP requests answered, by status code.", ["status"])
STREAMS_OPEN = Gauge("assist_streams_open", "/assist streams open now.", multiprocess_mode="livesum")
EVENTS_SENT = Counter("assist_events_sent_total", "Events sent, by content type.", ["content_type"])
AGENT_ERRORS = Counter("assist_agent_errors_total", "Agent runs that raised.")
TIMEOUTS = Counter("assist_timeouts_total", "Agent runs cut off by ASSIST_REQUEST_TIMEOUT.")
DISCONNECTS = Counter("assist_disconnects_total", "Streams whose client left before done.")
SHUTDOWN_ENDED = Counter("assist_streams_ended_by_shutdown_total", "Streams ended by server shutdown.")
STREAM_DURATION = Histogram(
    "assist_stream_duration_seconds",
    "Seconds from the start of a stream to its end.",
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600),
)


def change_open_streams(delta: int) -> None:
    STREAMS_OPEN.inc(delta)


def count_response(status: int) -> None:
    REQUESTS.labels(str(status)).inc()


async def metrics_endpoint(request: Request) -> Response:
    if os.environ.get(MULTIPROC_ENV):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
    else:
        registry = REGISTRY
    return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)


def observe_stream(stats: RunStats) -> None:
    """Add one finished stream's counts to the metrics (once per stream, not per event)."""
    for content_type, count in stats.events_by_type.items():
        EVENTS_SENT.labels(content_type).inc(count)
    if stats.agent_failed:
        AGENT_ERRORS.inc()
    if stats.timed_out:
        TIMEOUTS.inc()
    if stats.outcome == "disconnected":
        DISCONNECTS.inc()
    elif stats.outcome == "shutdown":
        SHUTDOWN_ENDED.inc()
    STREAM_DURATION.observe(time.monotonic() - stats.started)
