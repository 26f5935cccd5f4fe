"""The answered pauses of a service whose replicas share a Redis (ASSIST_REDIS_URL): a pause is
answered once across all of them, not once per process (runtime/pauses.py's AnsweredPauses).

The answered ids are one sorted set, `assist:{pauses}:answered`, each id scored by the Unix time
its token expires, in a key with no expiry: under a `volatile-*` eviction policy (or
`noeviction`) Redis never evicts it, however much other traffic fills Redis, where a key of its
own per id with an expiry could be evicted and its pause answered again. Each answer runs one
script, atomic in Redis, so of any number of answers sent at once to any replicas one claims
the id: it drops the ids whose tokens expired (by Redis's clock, one for all replicas), then
adds the id unless it is there. Like InMemoryAnsweredPauses it holds at most MAX_ANSWERED_PAUSES:
at the cap the id expiring first is forgotten and the floor (`assist:{pauses}:floor`, no expiry
either) rises to its expiry, so a token expiring no later is refused from then on: a flood of
pauses shortens the time to answer, and never lets a pause be answered twice. A Redis that
cannot be reached, or refuses the write (its memory full), refuses the answer (503, "try
again"): the pause is then not answered, never answered twice.
"""

from __future__ import annotations

import math
from typing import Any

from sentient_assist.runtime.pauses import MAX_ANSWERED_PAUSES, PauseRefused

# One hash tag: both keys in one Redis Cluster slot, as one script touches them.
ANSWERED_KEY = "assist:{pauses}:answered"
FLOOR_KEY = "assist:{pauses}:floor"
UNAVAILABLE = "The service cannot check now that this pause was not answered before; try again shortly."
CONNECT_TIMEOUT_SECONDS = 2.0
COMMAND_TIMEOUT_SECONDS = 2.0

# KEYS: the answered set, the floor. ARGV: the pause id, its token's expiry (Unix seconds), the cap.
# Returns 1 when claimed now, 0 when answered before (or as old as a forgotten one).
_CLAIM = """
local time = redis.call('TIME')
local now = tonumber(time[1]) + tonumber(time[2]) / 1000000
local expires = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local floor = tonumber(redis.call('GET', KEYS[2]) or '0')
if expires <= now or expires <= floor or redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  return 0
end
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then
  local forgotten = redis.call('ZPOPMIN', KEYS[1])
  floor = math.max(floor, tonumber(forgotten[2]))
  redis.call('SET', KEYS[2], floor)
  if expires <= floor then return 0 end
end
redis.call('ZADD', KEYS[1], expires, ARGV[1])
return 1
"""


class RedisAnsweredPauses:
    """Answered pause ids in the Redis at `url`; its connections are opened on the first claim."""

    def __init__(self, url: str, *, cap: int = MAX_ANSWERED_PAUSES) -> None:
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
        self._claim = self._redis.register_script(_CLAIM)
        self.cap = cap

    async def claim(self, pause_id: str, expires_at: float) -> bool:
        from redis.exceptions import RedisError

        try:
            claimed = await self._claim(
                keys=[ANSWERED_KEY, FLOOR_KEY], args=[pause_id, math.ceil(expires_at), self.cap]
            )
        except (RedisError, OSError):
            raise PauseRefused(UNAVAILABLE, status=503) from None
        return bool(claimed)

    async def aclose(self) -> None:
        await self._redis.aclose()
