"""The check, at start-up, that the Redis the replicas share (ASSIST_REDIS_URL) cannot evict what
must not go: the answered pauses (answered_pauses.py) and each key's quota accounting are kept
in keys with no expiry, which a `volatile-*` policy or `noeviction` never evicts, and an
`allkeys-*` policy may. Under such a policy an answered pause could be evicted by another
tenant's traffic and its approval run a second time, so the service refuses to start, naming
the policy and the fix (docs/deploying.md#redis).

The policy is read with `CONFIG GET maxmemory-policy`, or from `INFO memory` where a managed
Redis disables CONFIG. A Redis that does not answer at start is not checked (the service
starts, as its features do without Redis: they say so, and a pause is then refused, never
answered twice); it is checked at the next start.
"""

from __future__ import annotations

import logging
from typing import Any

from sentient_assist.runtime.errors import SettingsError

logger = logging.getLogger("sentient_assist.server")

CONNECT_TIMEOUT_SECONDS = 2.0
FIX = (
    "set `maxmemory-policy volatile-lru` (or another volatile-* policy, or noeviction) in redis.conf"
    " or with CONFIG SET; docs/deploying.md#redis"
)


def eviction_policy(client: Any) -> str | None:
    """The `maxmemory-policy` of the Redis `client` (redis.Redis) talks to; None if it says none."""
    from redis.exceptions import ResponseError

    try:
        reply = client.config_get("maxmemory-policy")
        policy = reply.get("maxmemory-policy")
    except ResponseError:  # CONFIG disabled or renamed (a managed Redis): INFO says it too
        policy = client.info("memory").get("maxmemory_policy")
    if isinstance(policy, bytes):
        policy = policy.decode()
    return str(policy) if policy else None


def can_evict_keys_without_expiry(policy: str) -> bool:
    return policy.startswith("allkeys-")


def check_eviction_policy(url: str) -> str | None:
    """SettingsError, one line naming the policy and the fix, when the Redis at `url` may evict
    keys with no expiry, or when the redis package is missing; its policy when it is fine; None
    when Redis does not answer now."""
    try:
        from redis import Redis
        from redis.exceptions import RedisError
    except ImportError:
        raise SettingsError(
            "ASSIST_REDIS_URL is set, and what the replicas share in Redis (answered pauses, resumable runs,"
            " A2A tasks) needs the redis package: pip install 'sentient-assist[redis]'"
        ) from None

    client = Redis.from_url(url, socket_connect_timeout=CONNECT_TIMEOUT_SECONDS, socket_timeout=CONNECT_TIMEOUT_SECONDS)
    try:
        policy = eviction_policy(client)
    except (RedisError, OSError) as exc:
        logger.warning("the eviction policy of Redis (ASSIST_REDIS_URL) was not checked: %s", type(exc).__name__)
        return None
    finally:
        client.close()
    if policy is not None and can_evict_keys_without_expiry(policy):
        raise SettingsError(
            f"ASSIST_REDIS_URL: Redis's maxmemory-policy is {policy}, which can evict the answered pauses"
            f" (a pause answered twice) and the per-key quotas; {FIX}"
        )
    return policy
