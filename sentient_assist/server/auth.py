"""Bearer-key auth: with ASSIST_API_KEYS set, /assist and the OpenAPI docs need `Authorization: Bearer <key>`.

The probes and /metrics carry no key check at all (load balancers and scrapers have no key),
so they stay open wherever the service is mounted.
"""

from __future__ import annotations

import hashlib
import hmac

from fastapi import HTTPException, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

# The scheme as OpenAPI shows it (the /docs page's Authorize button). It only reads the
# header; BearerKeys decides.
BEARER_SCHEME = HTTPBearer(auto_error=False, scheme_name="APIKey", description="One of the keys in ASSIST_API_KEYS.")


def bearer_token(authorization: str | None) -> str:
    """The key of an `Authorization: Bearer <key>` header, the scheme in any case ("" without
    one): what names a key's owner (its tasks, its runs, its calls), however the header spells it."""
    scheme, _, token = (authorization or "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


def key_owner(authorization: str | None) -> str:
    """Who a request is, by its key: a digest of it ("" without one). Its tasks, its runs and its
    share of the streams are this owner's."""
    token = bearer_token(authorization)
    if not token:
        return ""
    return "key-" + hashlib.sha256(token.encode("latin-1", "replace")).hexdigest()[:32]


def _digest(key: bytes) -> bytes:
    # Equal lengths for compare_digest, so the time taken tells nothing of a key's length.
    return hashlib.sha256(key).digest()


class BearerKeys:
    """The configured keys, kept as digests; says whether a request may pass."""

    __slots__ = ("_digests",)

    def __init__(self, keys: list[str]) -> None:
        self._digests = [_digest(key.encode()) for key in keys]

    def __bool__(self) -> bool:
        return bool(self._digests)

    def check(self, authorization: str | None) -> None:
        """Pass when no keys are configured or the `Authorization` header holds one; else 401."""
        if not self._digests:
            return
        token = bearer_token(authorization)
        if not token:
            raise HTTPException(
                401, "an API key is required: send Authorization: Bearer <key>", {"WWW-Authenticate": "Bearer"}
            )
        if not self._matches(token.encode("latin-1")):
            raise HTTPException(401, "the API key is not valid", {"WWW-Authenticate": 'Bearer error="invalid_token"'})

    async def require(self, credentials: HTTPAuthorizationCredentials | None = Security(BEARER_SCHEME)) -> None:
        """The dependency of a route that needs a key."""
        self.check(None if credentials is None else f"{credentials.scheme} {credentials.credentials}")

    def _matches(self, given: bytes) -> bool:
        digest = _digest(given)
        matched = False
        for known in self._digests:  # every key, every time: no early exit to time
            matched |= hmac.compare_digest(digest, known)
        return matched
