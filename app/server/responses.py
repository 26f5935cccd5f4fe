"""Plain ASGI answers: a request turned away, as JSON with a clear `detail`, before any stream starts."""

from __future__ import annotations

import json
from typing import Any, Mapping, NamedTuple, Sequence

from starlette.types import Send


class Refusal(NamedTuple):
    """A request turned away: its status, the `detail` that says why, and any headers (Retry-After...)."""

    status: int
    detail: Any
    headers: Mapping[str, str] = {}


async def send_refusal(send: Send, refusal: Refusal, extra_headers: Sequence[tuple[bytes, bytes]] = ()) -> int:
    """Send `refusal`; its status, for the access log."""
    # Encoded as Starlette's JSONResponse does, so every error the service sends looks alike.
    body = json.dumps({"detail": refusal.detail}, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    headers += [(name.lower().encode(), value.encode()) for name, value in refusal.headers.items()]
    headers += extra_headers
    await send({"type": "http.response.start", "status": refusal.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
    return refusal.status
