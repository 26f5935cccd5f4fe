"""The 422 of a body that is not a valid request: each bad field named, in plain words."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.requests import Request

NOT_JSON_HINT = "the body must be a JSON object, sent with Content-Type: application/json"


def validation_detail(errors: Iterable[Any]) -> list[dict[str, Any]]:
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


async def validation_error_handler(request: Request, exc: Exception) -> JSONResponse:
    """The app's handler of RequestValidationError: 422, `detail` as `validation_detail` writes it."""
    assert isinstance(exc, RequestValidationError)
    return JSONResponse(status_code=422, content={"detail": validation_detail(exc.errors())})
