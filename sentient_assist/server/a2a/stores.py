"""Where A2A tasks are kept: in this process (a2a-sdk's InMemoryTaskStore, bounded), or in Redis
(ASSIST_REDIS_URL), where every replica finds them: a task's next message, GetTask and CancelTask
are answered by whichever replica they reach.

Each task is kept ASSIST_RESUME_TTL seconds after its last change (as long as its pause can be
answered), and by the key that made it: a client sees only its own key's tasks (without keys,
all clients are one). What one process keeps is bounded in count and bytes; past either, the
tasks changed longest ago are forgotten first.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, cast

from a2a.auth.user import User
from a2a.server.cluster import ConcurrentTaskModificationError, StoredTask, TaskVersion, VersionedTaskStore
from a2a.server.context import ServerCallContext
from a2a.server.events import Event
from a2a.server.tasks import InMemoryTaskStore
from a2a.types.a2a_pb2 import ListTasksRequest, ListTasksResponse, Task, TaskState
from a2a.utils.errors import InternalError
from a2a.utils.proto_utils import to_stream_response
from redis.exceptions import RedisError

from sentient_assist.server.auth import key_owner

logger = logging.getLogger("sentient_assist.server")

# Not settings (yet): what one process keeps of finished and waiting tasks.
MAX_TASKS = 10_000
MAX_TASK_BYTES_TOTAL = 256 * 1024 * 1024
# The most recent tasks of one key that ListTasks reads from Redis.
MAX_TASKS_LISTED = 1_000
REDIS_PREFIX = "sentient_assist:a2a:"
# The earlier tasks of a context that a new task's conversation holds (A2A's conversation is its context).
MAX_CONTEXT_TASKS = 20


class KeyUser(User):
    """The caller, as far as tasks go: its key (a digest of it, never the key), or nobody."""

    def __init__(self, owner: str) -> None:
        self.owner = owner

    @property
    def is_authenticated(self) -> bool:
        return bool(self.owner)

    @property
    def user_name(self) -> str:
        return self.owner


def owner_of(authorization: str | None) -> str:
    """Whose tasks a request may see: its key's owner ("" without one), so `bearer K` and
    `Bearer K` are one owner, as the key check takes both."""
    return key_owner(authorization)


def _owner(context: ServerCallContext) -> str:
    return context.user.user_name


class BoundedTaskStore(InMemoryTaskStore):
    """a2a-sdk's InMemoryTaskStore, each task kept `ttl` seconds after its last save, at most
    MAX_TASKS of them and MAX_TASK_BYTES_TOTAL bytes together."""

    def __init__(self, ttl: float, *, max_tasks: int = MAX_TASKS, max_bytes: int = MAX_TASK_BYTES_TOTAL) -> None:
        super().__init__(owner_resolver=_owner)
        self.ttl = ttl
        self.max_tasks = max_tasks
        self.max_bytes = max_bytes
        self.bytes = 0
        # (owner, task id) -> (saved at, bytes), the longest unchanged first.
        self._kept: OrderedDict[tuple[str, str], tuple[float, int]] = OrderedDict()
        self._lock = threading.Lock()

    async def save(self, task: Task, context: ServerCallContext) -> None:
        await super().save(task, context)
        key, size, now = (_owner(context), task.id), task.ByteSize(), time.monotonic()
        with self._lock:
            old = self._kept.pop(key, None)
            self.bytes += size - (old[1] if old else 0)
            self._kept[key] = (now, size)
            forget = self._to_forget(now)
        for owner, task_id in forget:
            await super().delete(task_id, ServerCallContext(user=KeyUser(owner)))

    def _to_forget(self, now: float) -> list[tuple[str, str]]:
        forget = []
        kept = self._kept
        while kept and len(kept) > 1:
            key, (saved, size) = next(iter(kept.items()))
            if len(kept) <= self.max_tasks and self.bytes <= self.max_bytes and now - saved < self.ttl:
                break
            del kept[key]
            self.bytes -= size
            forget.append(key)
        return forget

    async def in_context(self, context_id: str, context: ServerCallContext) -> list[Task]:
        """The context's most recent tasks (at most MAX_CONTEXT_TASKS), the oldest first."""
        page = await self.list(ListTasksRequest(context_id=context_id, page_size=MAX_CONTEXT_TASKS), context)
        return list(reversed(page.tasks))

    async def get(self, task_id: str, context: ServerCallContext) -> Task | None:
        with self._lock:
            kept = self._kept.get((_owner(context), task_id))
        if kept is None or time.monotonic() - kept[0] >= self.ttl:
            return None
        return await super().get(task_id, context)

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        with self._lock:
            old = self._kept.pop((_owner(context), task_id), None)
            if old is not None:
                self.bytes -= old[1]
        await super().delete(task_id, context)


# One save, compared and set at once: the task's version must be the one it was read at (a
# replica that saves from an older read is refused), except for a write to CANCELED, which wins
# over any task not finished yet (a cancel from any replica). The event that made the task, if
# any, goes to the task's event stream with its version, in the same step: a follower never
# finds a version without its event, and it costs no round trip of its own. Returns the new
# version, or -1.
_SAVE = """
local version = tonumber(redis.call('HGET', KEYS[1], 'v') or '0')
local state = tonumber(redis.call('HGET', KEYS[1], 's') or '-1')
local finished = state == 3 or state == 4 or state == 5 or state == 7
if ARGV[6] == '1' then
  if version == 0 or finished then return -1 end
elseif version ~= tonumber(ARGV[2]) then
  return -1
end
version = version + 1
redis.call('HSET', KEYS[1], 'v', version, 's', ARGV[5], 'd', ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
redis.call('ZADD', KEYS[2], ARGV[4], ARGV[7])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', tonumber(ARGV[4]) - tonumber(ARGV[3]))
redis.call('ZREMRANGEBYRANK', KEYS[2], 0, -tonumber(ARGV[8]) - 1)
redis.call('PEXPIRE', KEYS[2], ARGV[3])
if version == 1 and ARGV[9] ~= '' then
  redis.call('ZADD', KEYS[3], ARGV[4], ARGV[7])
  redis.call('ZREMRANGEBYRANK', KEYS[3], 0, -tonumber(ARGV[10]) - 1)
  redis.call('PEXPIRE', KEYS[3], ARGV[3])
end
if ARGV[11] ~= '' then
  redis.call('XADD', KEYS[4], 'MAXLEN', '~', ARGV[12], '*', 'v', version, 'd', ARGV[11])
  redis.call('PEXPIRE', KEYS[4], ARGV[13])
end
return version
"""
# A task's events, for the replicas following it (task_events.py), kept this long after the last
# one: a follower reads the task, then the events after its version, within moments; a task that
# sends again (its next message) starts its stream again.
EVENTS_KEPT_SECONDS = 60.0
# The events one task's stream holds at most, the oldest going first: far more than a follower is
# ever behind, since the replica running the task sends at most one update every 20 ms.
MAX_EVENTS = 1_000


STORE_DOWN = "The task store (shared by the replicas) did not answer; try again shortly."
_Method = TypeVar("_Method", bound=Callable[..., Awaitable[object]])


def _store_errors_hidden(method: _Method) -> _Method:
    """Redis's failures (a timeout, a lost connection) as A2A's internal error with a message of
    ours: its own text names the store's address. The detail goes to the log."""

    @functools.wraps(method)
    async def guarded(*args: object, **kwargs: object) -> object:
        try:
            return await method(*args, **kwargs)
        except RedisError as exc:
            logger.warning("A2A task store: %s failed: %s", method.__name__, exc)
            raise InternalError(STORE_DOWN) from None

    return cast("_Method", guarded)


class RedisTaskStore(VersionedTaskStore):
    """Tasks in Redis, shared by the replicas: each task a hash (its protobuf bytes, its state
    and its version) that expires `ttl` seconds after its last save, each key's tasks a sorted
    set (by time of save) for ListTasks, and each task's events a Stream (`events_key`: {v: the
    version the event made, d: the event as A2A's StreamResponse bytes}, MAX_EVENTS at most,
    gone EVENTS_KEPT_SECONDS after the last), as a2a-sdk's SQL store keeps its task_events.

    Versioned, as a2a-sdk's cluster mode has it: a save from a stale read is refused
    (ConcurrentTaskModificationError), so that a task canceled on one replica while it runs on
    another ends there too: the running replica's next save is refused, it reads the task
    again, finds it canceled, and stops its run."""

    def __init__(self, redis: Any, ttl: float, *, prefix: str = REDIS_PREFIX) -> None:
        self.redis = redis  # a redis.asyncio.Redis
        self.ttl_ms = max(int(ttl * 1000), 1)
        self.prefix = prefix
        self._save = redis.register_script(_SAVE)

    def _task_key(self, owner: str, task_id: str) -> str:
        return f"{self.prefix}task:{owner}:{task_id}"

    def _index_key(self, owner: str) -> str:
        return f"{self.prefix}tasks:{owner}"

    def _context_key(self, owner: str, context_id: str) -> str:
        return f"{self.prefix}context:{owner}:{context_id}"

    def events_key(self, task_id: str) -> str:
        """The task's event stream. Named by the task's id alone (the SDK's UUIDs): a follower
        reads the task from the store, whose read is scoped to its key, before its events."""
        return f"{self.prefix}events:{task_id}"

    @_store_errors_hidden
    async def in_context(self, context_id: str, context: ServerCallContext) -> list[Task]:
        """The context's most recent tasks (at most MAX_CONTEXT_TASKS), the oldest first."""
        owner = _owner(context)
        ids = await self.redis.zrange(self._context_key(owner, context_id), -MAX_CONTEXT_TASKS, -1)
        tasks = []
        for task_id in ids:
            stored = await self.get(_text(task_id), context)
            if stored is not None:
                tasks.append(stored.task)
        return tasks

    @_store_errors_hidden
    async def save(
        self,
        task: Task,
        *,
        event: Event | None,
        prev: Task | None,
        prev_version: TaskVersion,
        context: ServerCallContext,
    ) -> TaskVersion:
        owner = _owner(context)
        canceling = task.status.state == TaskState.TASK_STATE_CANCELED
        version = await self._save(
            keys=[
                self._task_key(owner, task.id),
                self._index_key(owner),
                self._context_key(owner, task.context_id),
                self.events_key(task.id),
            ],
            args=[
                task.SerializeToString(),
                _number(prev_version),
                self.ttl_ms,
                int(time.time() * 1000),
                int(task.status.state),
                "1" if canceling else "0",
                task.id,
                MAX_TASKS_LISTED,
                task.context_id,
                MAX_CONTEXT_TASKS,
                b"" if event is None else to_stream_response(event).SerializeToString(),
                MAX_EVENTS,
                int(EVENTS_KEPT_SECONDS * 1000),
            ],
        )
        if int(version) < 0:
            raise ConcurrentTaskModificationError(task.id)
        return TaskVersion(int(version))

    @_store_errors_hidden
    async def get(self, task_id: str, context: ServerCallContext) -> StoredTask | None:
        found = await self.redis.hmget(self._task_key(_owner(context), task_id), ["v", "d"])
        if found[1] is None:
            return None
        task = Task()
        task.ParseFromString(found[1])
        return StoredTask(task, TaskVersion(int(found[0])))

    @_store_errors_hidden
    async def list(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        # The key's most recent tasks, filtered and paged as a2a-sdk's in-memory store does it.
        owner = _owner(context)
        ids = await self.redis.zrevrange(self._index_key(owner), 0, MAX_TASKS_LISTED - 1)
        page = InMemoryTaskStore(owner_resolver=_owner, use_copying=False)
        async with self.redis.pipeline(transaction=False) as pipe:
            for task_id in ids:
                pipe.hget(self._task_key(owner, _text(task_id)), "d")
            found = await pipe.execute() if ids else []
        for raw in found:
            if raw is not None:
                task = Task()
                task.ParseFromString(raw)
                await page.save(task, context)
        return await page.list(params, context)

    @_store_errors_hidden
    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        owner = _owner(context)
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.delete(self._task_key(owner, task_id))
            pipe.zrem(self._index_key(owner), task_id)
            await pipe.execute()


def _number(version: TaskVersion) -> int:
    """A version of this store, as the number it wraps (TaskVersion hashes by its value, and
    the hash of a small int is the int)."""
    return 0 if version.is_missing else hash(version)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
