"""Log formats: `text` (key=value fields) or `json` (one object a line), for ours and uvicorn's loggers."""

from __future__ import annotations

import json
import logging
import logging.config
import re
import time
from typing import Any

from sentient_assist.tracing import current_tracing

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_PLAIN = re.compile(r"[\w./:@%+-]*")


class TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        fields = getattr(record, "fields", None)
        if fields:
            line += " " + " ".join(f"{key}={_plain(value)}" for key, value in fields.items())
        ids = _trace_ids()
        if ids:
            line += f" trace_id={ids[0]} span_id={ids[1]}"
        return line


def _trace_ids() -> tuple[str, str] | None:
    """The current span's trace and span ids (hex), when the request's tracing is on and a span is current."""
    if current_tracing() is None:
        return None
    from opentelemetry import trace

    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return None
    return format(context.trace_id, "032x"), format(context.span_id, "016x")


def _plain(value: Any) -> str:
    """A field as is when it is a plain token; quoted (JSON) when it could fake a field or a line."""
    text = str(value)
    return text if _PLAIN.fullmatch(text) else json.dumps(text)


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        entry.update(getattr(record, "fields", None) or {})
        ids = _trace_ids()
        if ids:
            entry["trace_id"], entry["span_id"] = ids
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


def log_config(log_format: str, level: str) -> dict[str, Any]:
    """A logging.config dict for uvicorn and the app; uvicorn's access log is ours instead."""
    formatter = (
        "sentient_assist.server.logs.JsonFormatter"
        if log_format == "json"
        else "sentient_assist.server.logs.TextFormatter"
    )
    level = "DEBUG" if level == "trace" else level.upper()
    handler = {"class": "logging.StreamHandler", "formatter": "default", "stream": "ext://sys.stderr"}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"default": {"()": formatter}},
        "handlers": {"default": handler},
        "loggers": {
            "uvicorn": {"handlers": ["default"], "level": level, "propagate": False},
            "uvicorn.access": {"handlers": [], "level": "WARNING", "propagate": False},
            "sentient_assist": {"handlers": ["default"], "level": level, "propagate": False},
        },
    }


def configure_logging(log_format: str, level: str) -> None:
    logging.config.dictConfig(log_config(log_format, level))
