"""The /assist body: parsed and validated as FastAPI would, with errors that name each bad field.

A body is JSON when its Content-Type says so (application/json or application/*+json, any
parameters); one that is not JSON, or not UTF-8, or that Python's parser gives up on, is refused
with the same statuses and `detail` FastAPI gives: 422 naming the field, or 400.
"""

from __future__ import annotations

import email.message
import json
from typing import Any, Iterable

from pydantic import ValidationError

from app.protocol.request import Request
from app.server.responses import Refusal

NOT_JSON_HINT = "the body must be a JSON object, sent with Content-Type: application/json"
UNPARSEABLE = "There was an error parsing the body"


def validation_detail(errors: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """`detail` of a 422: each error's place, what is wrong in plain words, and its kind."""
    detail = []
    for error in errors:
        loc, kind, msg = list(error.get("loc", ())), error.get("type", ""), error.get("msg", "")
        if kind == "json_invalid":
            reason = (error.get("ctx") or {}).get("error", "")
            msg = f"the body is not valid JSON ({reason})" if reason else "the body is not valid JSON"
        elif loc == ["body"] and kind in ("model_attributes_type", "dict_type", "missing"):
            msg = NOT_JSON_HINT
        detail.append({"loc": loc, "msg": msg.removeprefix("Value error, "), "type": kind})
    return detail


def parse_request(body: bytes, content_type: str | None) -> Request | Refusal:
    """The validated request, or the 400/422 that says what is wrong with it."""
    if not body:
        return _invalid([{"type": "missing", "loc": ("body",), "msg": "Field required"}])
    if not _is_json(content_type):
        return _invalid([{"type": "model_attributes_type", "loc": ("body",), "msg": NOT_JSON_HINT}])
    try:
        # The common case in one step, with no dict of the whole body in between ...
        return Request.model_validate_json(body)
    except ValueError:
        pass  # ... and anything else the way FastAPI reads it, for the same answer
    try:
        value = json.loads(body)
    except json.JSONDecodeError as exc:
        return _invalid([{"type": "json_invalid", "loc": ("body", exc.pos), "msg": "JSON decode error", "ctx": {"error": exc.msg}}])
    except Exception:  # not UTF-8, or nested past the parser's limits
        return Refusal(400, UNPARSEABLE)
    try:
        # from_attributes as FastAPI validates a body: a value that is not an object is a model_attributes_type error.
        return Request.model_validate(value, from_attributes=True)
    except ValidationError as exc:
        return _invalid({**error, "loc": ("body", *error["loc"])} for error in exc.errors())
    except RecursionError:
        return Refusal(400, UNPARSEABLE)


def _is_json(content_type: str | None) -> bool:
    if not content_type:
        return False
    message = email.message.Message()
    message["content-type"] = content_type
    if message.get_content_maintype() != "application":
        return False
    subtype = message.get_content_subtype()
    return subtype == "json" or subtype.endswith("+json")


def _invalid(errors: Iterable[dict[str, Any]]) -> Refusal:
    return Refusal(422, validation_detail(errors))
