"""Bearer-key auth: with ASSIST_API_KEYS set, every route but the probes needs `Authorization: Bearer <key>`."""

from __future__ import annotations

import hashlib
import hmac

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from app.server.responses import Refusal, send_refusal

# Health, readiness and metrics stay open: load balancers and scrapers carry no key.
OPEN_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})


def _digest(key: bytes) -> bytes:
    # Equal lengths for compare_digest, so the time taken tells nothing of a key's length.
    return hashlib.sha256(key).digest()


class BearerKeys:
    """The configured keys, kept as digests; says whether a request may pass."""

    __slots__ = ("_digests",)

    def __init__(self, keys: list[str]) -> None:
        self._digests = [_digest(key.encode()) for key in keys]

    def refusal(self, scope: Scope) -> Refusal | None:
        """None when the request may pass: no keys configured, an open path, or a valid key."""
        if not self._digests or scope["path"] in OPEN_PATHS:
            return None
        given = _bearer_token(scope)
        if given is None:
            return Refusal(401, "an API key is required: send Authorization: Bearer <key>", {"WWW-Authenticate": "Bearer"})
        if not self._matches(given):
            return Refusal(401, "the API key is not valid", {"WWW-Authenticate": 'Bearer error="invalid_token"'})
        return None

    def _matches(self, given: bytes) -> bool:
        digest = _digest(given)
        matched = False
        for known in self._digests:  # every key, every time: no early exit to time
            matched |= hmac.compare_digest(digest, known)
        return matched


class BearerAuthMiddleware:
    def __init__(self, app: ASGIApp, keys: BearerKeys) -> None:
        self.app = app
        self.keys = keys

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            refusal = self.keys.refusal(scope)
            if refusal is not None:
                await send_refusal(send, refusal)
                return
        await self.app(scope, receive, send)


def _bearer_token(scope: Scope) -> bytes | None:
    header = Headers(scope=scope).get("authorization")
    if header is None:
        return None
    scheme, _, token = header.encode("latin-1").partition(b" ")
    if scheme.lower() == b"bearer" and token.strip():
        return token.strip()
    return None
