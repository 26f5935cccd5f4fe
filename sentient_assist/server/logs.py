"""Log formats: `text` (key=value fields) or `json` (one object a line), for ours and uvicorn's loggers."""

from __future__ import annotations

import json
import logging
import logging.config
import re
import time
from typing import Any

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
        return line


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
