"""Plain ASGI answers: a JSON error with a clear `detail`, sent before any stream starts."""

from __future__ import annotations

import json
from typing import Any, NamedTuple

from starlette.types import Send


class Refusal(NamedTuple):
    """A request turned away: its status, the `detail` that says why, and any headers (Retry-After...)."""

    status: int
    detail: Any
    headers: dict[str, str] = {}


async def send_json_error(
    send: Send, status: int, detail: Any, headers: dict[str, str] | None = None,
    extra_headers: list[tuple[bytes, bytes]] = (),  # type: ignore[assignment]
) -> None:
    # Encoded as Starlette's JSONResponse does, so every error the service sends looks alike.
    body = json.dumps({"detail": detail}, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()
    raw_headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    raw_headers += [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    raw_headers += extra_headers
    await send({"type": "http.response.start", "status": status, "headers": raw_headers})
    await send({"type": "http.response.body", "body": body})


async def send_refusal(send: Send, refusal: Refusal, extra_headers: list[tuple[bytes, bytes]] = ()) -> int:  # type: ignore[assignment]
    """Send `refusal`; its status, for the access log."""
    await send_json_error(send, refusal.status, refusal.detail, refusal.headers, extra_headers)
    return refusal.status
