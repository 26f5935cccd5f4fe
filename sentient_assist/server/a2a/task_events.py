"""A2A task events between replicas, in Redis Streams: a2a-sdk's `TaskEventStream`, so that
SubscribeToTask on a replica that does not run the task follows it live.

The SDK's cluster mode does the rest: a replica asked to follow a task it does not run answers
with the task as stored, then with the events after that version, until the task ends or waits
for input. The events are written by the task store (stores.py, `RedisTaskStore.save`): each
save of the replica running the task appends the event that made it, with its version, in the
same step, as a2a-sdk's SQL store does; so `publish` has nothing left to do.

Followers wait in XREAD on a pool of their own (redis_readers.py: at most 64 connections a
replica, a second at a time): however many follow, the store's saves keep their connections.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

from a2a.server.cluster import TaskEventStream, TaskVersion, VersionedEvent
from a2a.server.events.event_queue import Event
from a2a.types.a2a_pb2 import StreamResponse
from a2a.utils.errors import InternalError
from redis.exceptions import RedisError  # found by server/faces.py before this is imported

from sentient_assist.server.a2a.stores import RedisTaskStore
from sentient_assist.server.redis_readers import READ_BLOCK_SECONDS

READ_COUNT = 100
# What a follower gets instead of its updates when Redis fails it (or no connection came in time).
UNAVAILABLE = "The task's updates could not be read from the shared store; try again shortly."


class RedisTaskEventStream(TaskEventStream):
    """The events `store` writes with each save, read by the replicas following a task through
    `followers` (redis_readers.readers_client())."""

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


def _event_of(data: bytes) -> Event:
    response = StreamResponse()
    response.ParseFromString(data)
    payload = response.WhichOneof("payload")
    if payload is None:
        raise InternalError(message=UNAVAILABLE)
    event: Event = getattr(response, payload)
    return event
