"""The 422 of a body that is not a valid request: each bad field named, in plain words.

What it costs to answer is bounded whatever the body (docs/protocol.md, "Answers that are
not a stream"): the first MAX_ERRORS errors, each location part and message cut short, never
a value the client sent, and a last entry that counts the errors left out. The request model
keeps the errors few to begin with (sentient_assist/protocol/request.py: a list stops at its first bad item).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.requests import Request

NOT_JSON_HINT = "the body must be a JSON object, sent with Content-Type: application/json"
MAX_ERRORS = 20
MAX_LOC_PART_LENGTH = 64  # a location part can be a JSON object key, of any length
MAX_MSG_LENGTH = 256
# What the entries may take together, encoded, so that a 422 stays under 16 KiB.
MAX_DETAIL_BYTES = 12 * 1024
TOO_MANY_ERRORS = "too_many_errors"
_CUT = "…"


def validation_detail(errors: Iterable[Any]) -> list[dict[str, Any]]:
    """`detail` of a 422: the first errors' place, what is wrong in plain words, and its kind;
    then, if some are left out, an entry `{"loc": ["body"], "msg": "... and N more errors",
    "type": "too_many_errors"}`."""
    errors = list(errors)
    detail: list[dict[str, Any]] = []
    size = 0
    for error in errors[:MAX_ERRORS]:
        entry = _entry(error)
        size += len(json.dumps(entry))  # escaped to ASCII: at least its size in the response
        if size > MAX_DETAIL_BYTES:
            break
        detail.append(entry)
    left_out = len(errors) - len(detail)
    if left_out:
        more = f"{left_out} more error{'s' if left_out > 1 else ''}"
        detail.append({"loc": ["body"], "msg": f"... and {more}", "type": TOO_MANY_ERRORS})
    return detail


def _entry(error: Any) -> dict[str, Any]:
    """One error as the client sees it: never its `input` or `ctx`, which hold what was sent."""
    loc = [_cut(part, MAX_LOC_PART_LENGTH) if isinstance(part, str) else part for part in error.get("loc", ())]
    kind, msg = str(error.get("type", "")), str(error.get("msg", ""))
    if kind == "json_invalid":
        reason = (error.get("ctx") or {}).get("error", "")
        msg = f"the body is not valid JSON ({reason})" if reason else "the body is not valid JSON"
    elif loc == ["body"] and kind in ("model_attributes_type", "dict_type", "missing"):
        msg = NOT_JSON_HINT
    elif kind == "union_tag_invalid":  # pydantic's message quotes the tag that was sent
        ctx = error.get("ctx") or {}
        msg = f"Input {ctx.get('discriminator')} does not match any of the expected tags: {ctx.get('expected_tags')}"
    return {
        "loc": loc,
        "msg": _cut(msg.removeprefix("Value error, "), MAX_MSG_LENGTH),
        "type": _cut(kind, MAX_MSG_LENGTH),
    }


def _cut(text: str, length: int) -> str:
    return text if len(text) <= length else text[: length - 1] + _CUT


async def validation_error_handler(request: Request, exc: Exception) -> JSONResponse:
    """The app's handler of RequestValidationError: 422, `detail` as `validation_detail` writes it."""
    assert isinstance(exc, RequestValidationError)
    return JSONResponse(status_code=422, content={"detail": validation_detail(exc.errors())})
