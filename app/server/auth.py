"""Bearer-key auth: with ASSIST_API_KEYS set, every route but the probes needs `Authorization: Bearer <key>`."""

from __future__ import annotations

import hashlib
import hmac

from starlette.types import ASGIApp, Receive, Scope, Send

from app.server.responses import send_json_error

# Health, readiness and metrics stay open: load balancers and scrapers carry no key.
OPEN_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})


def _digest(key: bytes) -> bytes:
    # Equal lengths for compare_digest, so the time taken tells nothing of a key's length.
    return hashlib.sha256(key).digest()


class BearerAuthMiddleware:
    def __init__(self, app: ASGIApp, keys: list[str]) -> None:
        self.app = app
        self._digests = [_digest(key.encode()) for key in keys]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self._digests or scope["path"] in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        given = _bearer_token(scope)
        if given is None:
            await send_json_error(
                send, 401, "an API key is required: send Authorization: Bearer <key>", {"WWW-Authenticate": "Bearer"}
            )
            return
        if not self._matches(given):
            await send_json_error(
                send, 401, "the API key is not valid", {"WWW-Authenticate": 'Bearer error="invalid_token"'}
            )
            return
        await self.app(scope, receive, send)

    def _matches(self, given: bytes) -> bool:
        digest = _digest(given)
        matched = False
        for known in self._digests:  # every key, every time: no early exit to time
            matched |= hmac.compare_digest(digest, known)
        return matched


def _bearer_token(scope: Scope) -> bytes | None:
    for name, value in scope["headers"]:
        if name == b"authorization":
            scheme, _, token = value.partition(b" ")
            if scheme.lower() == b"bearer" and token.strip():
                return token.strip()
            return None
    return None
