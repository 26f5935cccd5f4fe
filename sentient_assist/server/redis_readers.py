"""A Redis client for readers that follow a Stream with XREAD BLOCK (a resumable run's reader on
another replica, an A2A task's follower): a bounded pool, each read bounded in time.

A blocked read holds its connection for as long as it blocks, so however many readers a replica
has, it holds at most MAX_CONNECTIONS connections on their pool; past it a reader waits up to
POOL_WAIT_SECONDS for one, then fails (redis-py's ConnectionError), and each feature says so to
its client. Its own other commands (writes, a heartbeat) are not starved by readers when they
have a pool of their own.
"""

from __future__ import annotations

from typing import Any

from redis.asyncio import BlockingConnectionPool, Redis

MAX_CONNECTIONS = 64
POOL_WAIT_SECONDS = 5.0
# A reader blocks this long at a time, then reads again (and notices it was left meanwhile).
READ_BLOCK_SECONDS = 1.0
CONNECT_TIMEOUT_SECONDS = 2.0
SOCKET_TIMEOUT_SECONDS = READ_BLOCK_SECONDS + 4.0


def readers_client(url: str) -> Any:
    """A client on a pool of its own for the readers (closing the client closes the pool).
    Typed loosely: redis-py's replies are bytes | str | None by its stubs, bytes as configured."""
    pool = BlockingConnectionPool.from_url(
        url,
        max_connections=MAX_CONNECTIONS,
        timeout=POOL_WAIT_SECONDS,
        socket_connect_timeout=CONNECT_TIMEOUT_SECONDS,
        socket_timeout=SOCKET_TIMEOUT_SECONDS,
    )
    return Redis.from_pool(pool)
