"""Errors of the OpenAI-compatible face, in OpenAI's shape: `{"error": {"message", "type", "param", "code"}}`.

OpenAI clients (the openai SDKs, Open WebUI, LibreChat) read that object and nothing else:
a refusal before the stream is an HTTP status with it as the body, and an `error` event
mid-stream is a `data:` line holding it (docs/openai.md, "Errors").
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from sentient_assist.runtime.errors import InputError
from sentient_assist.server.validation import validation_detail

# The codes OpenAI's own API gives these; clients (and their users) recognise them.
INVALID_API_KEY = "invalid_api_key"
INVALID_VALUE = "invalid_value"
MODEL_NOT_FOUND = "model_not_found"
UNKNOWN_URL = "unknown_url"
_RETRY_AFTER_SECONDS = "1"
# The openai SDKs retry a 408, 409, 429 and 5xx (twice, by default) unless told not to. An
# error of a run comes after the agent has run: a retry would run it again, for one call.
NO_RETRY = {"x-should-retry": "false"}
_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode


class JSONAnswer(JSONResponse):
    """A JSON body that cannot fail to encode: an agent's text may hold a lone surrogate (valid
    in a JSON request, echoed back), which has no UTF-8 form; it is replaced, as in a stream,
    where Starlette's JSONResponse would raise (a 500, after the agent's work)."""

    def render(self, content: Any) -> bytes:
        return _dumps(content).encode("utf-8", "replace")


def error_type(status: int) -> str:
    """OpenAI's `type` for an HTTP status."""
    if status == 401:
        return "authentication_error"
    if status == 403:
        return "permission_error"
    if status == 429:
        return "rate_limit_error"
    if status >= 500:
        return "server_error"
    return "invalid_request_error"


def error_object(message: str, status: int, *, param: str | None = None, code: str | None = None) -> dict[str, Any]:
    """The `{"error": ...}` body. Without a code of its own, `code` is the status as a string: a
    mid-stream error has no status line to carry it."""
    return {
        "error": {
            "message": message,
            "type": error_type(status),
            "param": param,
            "code": code if code is not None else str(status),
        }
    }


def error_response(
    message: str,
    status: int,
    *,
    param: str | None = None,
    code: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    """An answer that is only an error. A 429 or 503 says when to retry, as /assist's do."""
    all_headers = dict(headers or {})
    if status in (429, 503):
        all_headers.setdefault("Retry-After", _RETRY_AFTER_SECONDS)
    return JSONAnswer(error_object(message, status, param=param, code=code), status, headers=all_headers)


def from_http_exception(exc: HTTPException) -> JSONResponse:
    """One of /assist's refusals (401, 408, 413, 503, ...), or FastAPI's own (a body it could
    not parse), with its headers, in OpenAI's shape."""
    code = INVALID_API_KEY if exc.status_code == 401 else None
    return error_response(str(exc.detail), exc.status_code, code=code, headers=exc.headers)


def unknown_url(served: str) -> JSONResponse:
    """A path under the face's prefix that it does not serve (/v1/embeddings, /v1/completions);
    `served` names those it does. As every message here, it does not repeat what was sent."""
    return error_response(f"Unknown request URL: this service answers only {served}.", 404, code=UNKNOWN_URL)


def method_not_allowed(allowed: set[str]) -> JSONResponse:
    allow = ", ".join(sorted(allowed))
    return error_response(
        f"Method not allowed: this URL answers {allow} only.", 405, code="method_not_allowed", headers={"Allow": allow}
    )


def from_input_error(exc: InputError) -> JSONResponse:
    """A chat request this service cannot answer: its field is the error's `param`; without a code
    of its own, OpenAI's for a bad value."""
    return error_response(exc.message, exc.status, param=exc.field, code=exc.code or INVALID_VALUE)


def from_validation_error(exc: RequestValidationError) -> JSONResponse:
    """A body that is not a chat request: 400, as OpenAI answers, naming the first bad field
    (`messages[2].role`) in `param` and in the message; worded as /assist's 422 is, never
    quoting what was sent."""
    errors = exc.errors()
    detail = validation_detail(errors[:1])
    loc, msg, kind = (detail[0]["loc"], str(detail[0]["msg"]), str(detail[0]["type"])) if detail else ([], "", "")
    # A JSON syntax error's place is a character offset, not a field.
    param = None if kind == "json_invalid" else param_of(loc)
    message = msg if param is None else f"{param}: {msg}"
    others = len(errors) - 1
    if others > 0:
        message += f" (and {others} more error{'s' if others > 1 else ''})"
    return error_response(message, 400, param=param, code=kind or None)


def param_of(loc: list[Any]) -> str | None:
    """`["body", "messages", 2, "role"]` as OpenAI-style clients write a field: `messages[2].role`."""
    param = ""
    for part in loc[1:] if loc[:1] == ["body"] else loc:
        param += f"[{part}]" if isinstance(part, int) else (f".{part}" if param else str(part))
    return param or None
