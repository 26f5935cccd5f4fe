"""A2A task events between replicas, in Redis Streams: a2a-sdk's `TaskEventStream`, so that
SubscribeToTask on a replica that does not run the task follows it live.

The SDK's cluster mode does the rest: a replica asked to follow a task it does not run answers
with the task as stored, then with the events after that version, until the task ends or waits
for input. The events are written by the task store (stores.py, `RedisTaskStore.save`): each
save of the replica running the task appends the event that made it, with its version, in the
same step, as a2a-sdk's SQL store does; so `publish` has nothing left to do.

Followers wait in XREAD on a pool of their own, at most MAX_FOLLOWER_CONNECTIONS connections, a
second at a time: however many follow, the store's saves keep their connections.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

from a2a.server.cluster import TaskEventStream, TaskVersion, VersionedEvent
from a2a.server.events.event_queue import Event
from a2a.types.a2a_pb2 import StreamResponse
from a2a.utils.errors import InternalError
from redis.asyncio import BlockingConnectionPool, Redis  # found by mount.py before this is imported
from redis.exceptions import RedisError

from sentient_assist.server.a2a.stores import RedisTaskStore

# Followers' connections to Redis, per replica; past it a follower waits POOL_WAIT_SECONDS for
# one, then gets an error rather than its updates.
MAX_FOLLOWER_CONNECTIONS = 64
POOL_WAIT_SECONDS = 5.0
READ_BLOCK_SECONDS = 1.0
READ_COUNT = 100
CONNECT_TIMEOUT_SECONDS = 2.0
SOCKET_TIMEOUT_SECONDS = READ_BLOCK_SECONDS + 4.0
UNAVAILABLE = "The task's updates could not be read from the shared store; try again shortly."


class RedisTaskEventStream(TaskEventStream):
    """The events `store` writes with each save, read by the replicas following a task through
    `followers` (a client on a bounded pool of its own: `followers_client()`)."""

    def __init__(self, store: RedisTaskStore, followers: Any) -> None:
        self.store = store
        self.followers = followers  # redis.asyncio.Redis

    async def publish(self, task_id: str, event: VersionedEvent) -> None:
        """Nothing: the store wrote the event with the save that made its version."""

    async def subscribe(self, task_id: str, *, after: TaskVersion) -> AsyncGenerator[VersionedEvent, None]:
        """The task's events newer than `after`, as they come; the SDK stops reading once the
        task ends or waits for input, and the request's time limit bounds the wait for them."""
        key, cursor = self.store.events_key(task_id), "0-0"
        block_ms = int(READ_BLOCK_SECONDS * 1000)
        while True:
            try:
                found = await self.followers.xread({key: cursor}, count=READ_COUNT, block=block_ms)
            except RedisError as failed:
                raise InternalError(message=UNAVAILABLE) from failed
            for _stream, entries in found or ():
                for entry_id, fields in entries:
                    cursor = entry_id
                    version = TaskVersion(int(fields[b"v"]))
                    if version.is_after(after):
                        yield VersionedEvent(event=_event_of(fields[b"d"]), version=version)

    async def destroy(self, task_id: str) -> None:
        """Nothing: a task's stream expires on its own (stores.EVENTS_KEPT_SECONDS)."""


def followers_client(url: str) -> Any:
    """A client for followers' reads: at most MAX_FOLLOWER_CONNECTIONS connections, each read
    bounded in time."""
    pool = BlockingConnectionPool.from_url(
        url,
        max_connections=MAX_FOLLOWER_CONNECTIONS,
        timeout=POOL_WAIT_SECONDS,
        socket_connect_timeout=CONNECT_TIMEOUT_SECONDS,
        socket_timeout=SOCKET_TIMEOUT_SECONDS,
    )
    return Redis.from_pool(pool)  # the client owns its pool: closing it closes the pool


def _event_of(data: bytes) -> Event:
    response = StreamResponse()
    response.ParseFromString(data)
    payload = response.WhichOneof("payload")
    if payload is None:
        raise InternalError(message=UNAVAILABLE)
    event: Event = getattr(response, payload)
    return event
