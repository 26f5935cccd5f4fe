"""The answered pauses of a service whose replicas share a Redis (ASSIST_REDIS_URL): a pause is
answered once across all of them, not once per process (runtime/pauses.py's AnsweredPauses).

Each answer claims its pause's id with `SET assist:pause:<id> 1 NX EXAT <the token's expiry>`:
one command, atomic in Redis, so of any number of answers sent at once to any replicas one
claims it; the key expires when the token would no longer verify, so Redis holds an id only as
long as it matters. A Redis that cannot be reached refuses the answer (503, "try again"): the
pause is then not answered, never answered twice.
"""

from __future__ import annotations

import math
from typing import Any

from sentient_assist.runtime.pauses import PauseRefused

KEY_PREFIX = "assist:pause:"
UNAVAILABLE = "The service cannot check now that this pause was not answered before; try again shortly."
CONNECT_TIMEOUT_SECONDS = 2.0
COMMAND_TIMEOUT_SECONDS = 2.0


class RedisAnsweredPauses:
    """Answered pause ids in the Redis at `url`; its connections are opened on the first claim."""

    def __init__(self, url: str) -> None:
        try:
            from redis.asyncio import Redis
        except ImportError:
            raise ImportError(
                "ASSIST_REDIS_URL is set: paused runs are answered once across replicas in Redis, which needs"
                " the redis package: pip install 'sentient-assist[redis]'"
            ) from None
        self._redis: Any = Redis.from_url(
            url, socket_connect_timeout=CONNECT_TIMEOUT_SECONDS, socket_timeout=COMMAND_TIMEOUT_SECONDS
        )

    async def claim(self, pause_id: str, expires_at: float) -> bool:
        from redis.exceptions import RedisError

        try:
            claimed = await self._redis.set(KEY_PREFIX + pause_id, b"1", nx=True, exat=math.ceil(expires_at))
        except (RedisError, OSError):
            raise PauseRefused(UNAVAILABLE, status=503) from None
        return bool(claimed)

    async def aclose(self) -> None:
        await self._redis.aclose()
