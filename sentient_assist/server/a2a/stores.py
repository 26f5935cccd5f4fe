"""Where A2A tasks are kept: in this process (BoundedTaskStore), or in Redis (ASSIST_REDIS_URL),
where every replica finds them: a task's next message, GetTask and CancelTask are answered by
whichever replica they reach.

Each task is kept ASSIST_RESUME_TTL seconds after its last change (as long as its pause can be
answered), and by the key that made it: a client sees only its own key's tasks (without keys,
all clients are one). Each key keeps at most ASSIST_A2A_MAX_TASKS_PER_KEY tasks and
ASSIST_A2A_MAX_TASK_BYTES_PER_KEY bytes (their events included): past either, its own finished
tasks changed longest ago are forgotten first, and when none is left to forget, a new task (or
a task's growth) is refused with an error naming the setting; the other keys are served as
before. A change of at most QUOTA_SLACK_BYTES (a status: failed, canceled) always lands, so a
task past the quota still ends. ListTasks reads the page it answers with, never the key's every
task (listing.py).
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from a2a.auth.user import User
from a2a.server.cluster import ConcurrentTaskModificationError, StoredTask, TaskVersion, VersionedTaskStore
from a2a.server.context import ServerCallContext
from a2a.server.events import Event
from a2a.server.tasks import TaskStore
from a2a.types.a2a_pb2 import ListTasksRequest, ListTasksResponse, Task, TaskState
from a2a.utils.errors import InternalError
from a2a.utils.proto_utils import to_stream_response
from redis.exceptions import RedisError

from sentient_assist.server.a2a.listing import Listed, page_of
from sentient_assist.server.auth import key_owner

logger = logging.getLogger("sentient_assist.server")

# Not settings (yet): what one process keeps of every key's tasks together.
MAX_TASKS = 10_000
MAX_TASK_BYTES_TOTAL = 256 * 1024 * 1024
REDIS_PREFIX = "sentient_assist:a2a:"
# The earlier tasks of a context that a new task's conversation holds (A2A's conversation is its context).
MAX_CONTEXT_TASKS = 20
# What a task costs beside its bytes, counted with them: in this process, the objects that keep
# it (its entry, its listing, two dictionaries' slots: measured about 780 bytes); in Redis, its
# hash's and its entries' overhead in the key's index and listing (MEMORY USAGE: about 300).
MEMORY_ENTRY_BYTES = 1024
REDIS_ENTRY_BYTES = 384
# A save past the key's quota that grows its task by no more than this lands all the same.
QUOTA_SLACK_BYTES = 1024
FINISHED = frozenset(
    {
        TaskState.TASK_STATE_COMPLETED,
        TaskState.TASK_STATE_FAILED,
        TaskState.TASK_STATE_CANCELED,
        TaskState.TASK_STATE_REJECTED,
    }
)
TOO_MANY = (
    "This key keeps {limit} A2A tasks (ASSIST_A2A_MAX_TASKS_PER_KEY), none of them finished: cancel some, or"
    " answer them, before sending a new one."
)
TOO_LARGE = (
    "This key's A2A tasks hold {limit} bytes (ASSIST_A2A_MAX_TASK_BYTES_PER_KEY), none of them finished to"
    " forget: cancel or answer some before sending more."
)


def quota_error(count_reached: bool, *, max_tasks: int, max_bytes: int) -> InternalError:
    """The JSON-RPC error of a save past the key's quota, naming the setting."""
    return InternalError(TOO_MANY.format(limit=max_tasks) if count_reached else TOO_LARGE.format(limit=max_bytes))


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


@dataclass(slots=True)
class _Kept:
    data: bytes  # the task, serialized: held compact, and what is held is what is counted
    listed: Listed
    saved: float  # time.monotonic() of its last save
    size: int  # what it counts: its bytes and MEMORY_ENTRY_BYTES


class BoundedTaskStore(TaskStore):
    """Tasks in this process, each as its protobuf bytes (a task parsed is some thirty times its
    bytes; it is parsed only to be read), kept `ttl` seconds after its last save, within each
    key's quota, and at most MAX_TASKS and MAX_TASK_BYTES_TOTAL for every key together (past
    either, the tasks changed longest ago are forgotten first, whichever their key)."""

    def __init__(
        self,
        ttl: float,
        *,
        max_tasks_per_key: int,
        max_bytes_per_key: int,
        max_tasks: int = MAX_TASKS,
        max_bytes: int = MAX_TASK_BYTES_TOTAL,
    ) -> None:
        self.ttl = ttl
        self.max_tasks_per_key = max_tasks_per_key
        self.max_bytes_per_key = max_bytes_per_key
        self.max_tasks = max_tasks
        self.max_bytes = max_bytes
        self.bytes = 0
        # (owner, task id) -> its entry, the longest unchanged first; and each owner's, in the same order.
        self._kept: OrderedDict[tuple[str, str], _Kept] = OrderedDict()
        self._owners: dict[str, OrderedDict[str, _Kept]] = {}
        self._owner_bytes: dict[str, int] = {}
        self._lock = threading.Lock()

    async def save(self, task: Task, context: ServerCallContext) -> None:
        owner, data, now = _owner(context), task.SerializeToString(), time.monotonic()
        kept = _Kept(data, Listed.of(task), now, len(data) + MEMORY_ENTRY_BYTES)
        with self._lock:
            self._expire(now)
            mine = self._owners.setdefault(owner, OrderedDict())
            old = mine.get(task.id)
            if old is None or kept.size > old.size + QUOTA_SLACK_BYTES:
                self._make_room(owner, mine, task.id, kept.size - (old.size if old else 0), new=old is None)
            self._forget(owner, task.id)
            mine = self._owners.setdefault(owner, OrderedDict())  # anew: forgetting its last task drops it
            mine[task.id] = kept
            self._kept[(owner, task.id)] = kept
            self._owner_bytes[owner] = self._owner_bytes.get(owner, 0) + kept.size
            self.bytes += kept.size
            while len(self._kept) > self.max_tasks or self.bytes > self.max_bytes:
                (oldest_owner, oldest_id), _ = next(iter(self._kept.items()))
                if (oldest_owner, oldest_id) == (owner, task.id):
                    break
                self._forget(oldest_owner, oldest_id)

    def _make_room(self, owner: str, mine: OrderedDict[str, _Kept], task_id: str, growth: int, *, new: bool) -> None:
        """Forget the key's own finished tasks, the longest unchanged first, until `growth` more
        bytes (and a task more, if `new`) fit its quota; else refuse the save."""
        count = len(mine) + (1 if new else 0)
        total = self._owner_bytes.get(owner, 0) + growth
        if count <= self.max_tasks_per_key and total <= self.max_bytes_per_key:
            return
        for other_id, other in list(mine.items()):
            if count <= self.max_tasks_per_key and total <= self.max_bytes_per_key:
                break
            if other_id != task_id and other.listed.state in FINISHED:
                self._forget(owner, other_id)
                count -= 1
                total -= other.size
        if count > self.max_tasks_per_key or total > self.max_bytes_per_key:
            raise quota_error(
                count > self.max_tasks_per_key, max_tasks=self.max_tasks_per_key, max_bytes=self.max_bytes_per_key
            )

    def _forget(self, owner: str, task_id: str) -> None:
        kept = self._kept.pop((owner, task_id), None)
        if kept is None:
            return
        mine = self._owners[owner]
        del mine[task_id]
        self.bytes -= kept.size
        self._owner_bytes[owner] -= kept.size
        if not mine:
            del self._owners[owner], self._owner_bytes[owner]

    def _expire(self, now: float) -> None:
        while self._kept:
            (owner, task_id), kept = next(iter(self._kept.items()))
            if now - kept.saved < self.ttl:
                return
            self._forget(owner, task_id)

    def _live(self, owner: str, task_id: str) -> bytes | None:
        with self._lock:
            mine = self._owners.get(owner)
            kept = mine.get(task_id) if mine is not None else None
        if kept is None or time.monotonic() - kept.saved >= self.ttl:
            return None
        return kept.data

    async def get(self, task_id: str, context: ServerCallContext) -> Task | None:
        data = self._live(_owner(context), task_id)
        return None if data is None else _parsed(data)

    async def in_context(self, context_id: str, context: ServerCallContext) -> list[Task]:
        """The context's most recent tasks (at most MAX_CONTEXT_TASKS), the oldest first."""
        page = await self.list(ListTasksRequest(context_id=context_id, page_size=MAX_CONTEXT_TASKS), context)
        return list(reversed(page.tasks))

    async def list(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        owner, now = _owner(context), time.monotonic()
        with self._lock:
            mine = self._owners.get(owner)
            listed = [kept.listed for kept in mine.values() if now - kept.saved < self.ttl] if mine else []
        page = page_of(listed, params)
        tasks = []
        for task_id in page.ids:  # only the page's tasks are parsed
            data = self._live(owner, task_id)
            if data is not None:
                tasks.append(_parsed(data))
        return ListTasksResponse(
            tasks=tasks, next_page_token=page.next_page_token, total_size=page.total_size, page_size=page.page_size
        )

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        with self._lock:
            self._forget(_owner(context), task_id)


def _parsed(data: bytes) -> Task:
    task = Task()
    task.ParseFromString(data)
    return task


# One save, compared and set at once: the task's version must be the one it was read at (a
# replica that saves from an older read is refused), except for a write to CANCELED, which wins
# over any task not finished yet (a cancel from any replica). The event that made the task, if
# any, goes to the task's event stream with its version, in the same step: a follower never
# finds a version without its event, and it costs no round trip of its own.
#
# The key's quota, in the same step: its index (task id -> time of its last save), its listing
# (task id -> "size:state:status time:saved:context id") and its byte total are keys with no
# expiry (so no eviction policy that keeps keys without one drops them: docs/deploying.md#redis),
# pruned here of the tasks expired since; past the quota, the key's finished tasks saved longest
# ago, and those Redis no longer holds (evicted), are forgotten, then the save is refused.
# Returns the new version; -1: a stale read; -2, -3: past the count, the bytes.
_SAVE = """
local version = tonumber(redis.call('HGET', KEYS[1], 'v') or '0')
local state = tonumber(redis.call('HGET', KEYS[1], 's') or '-1')
local finished = state == 3 or state == 4 or state == 5 or state == 7
if ARGV[6] == '1' then
  if version == 0 or finished then return -1 end
elseif version ~= tonumber(ARGV[2]) then
  return -1
end
local now, ttl = tonumber(ARGV[4]), tonumber(ARGV[3])
local total = tonumber(redis.call('GET', KEYS[6]) or '0')
local function listed(id)
  local meta = redis.call('HGET', KEYS[5], id)
  if not meta then return 0, -1 end
  local size, st = string.match(meta, '^(%d+):(%d+):')
  return tonumber(size), tonumber(st)
end
local function forget(id)
  total = total - listed(id)
  redis.call('HDEL', KEYS[5], id)
  redis.call('ZREM', KEYS[2], id)
end
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now - ttl)) do forget(id) end
local events = 0
if redis.call('EXISTS', KEYS[4]) == 1 then events = tonumber(redis.call('HGET', KEYS[1], 'e') or '0') end
events = events + #ARGV[11]
local size = #ARGV[1] + events + tonumber(ARGV[18])
local old = listed(ARGV[7])
local new = redis.call('ZSCORE', KEYS[2], ARGV[7]) == false
local max_tasks, max_bytes = tonumber(ARGV[8]), tonumber(ARGV[14])
local count = redis.call('ZCARD', KEYS[2]) + (new and 1 or 0)
if (count > max_tasks or total - old + size > max_bytes) and (new or size > old + tonumber(ARGV[19])) then
  for _, id in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do
    if count <= max_tasks and total - old + size <= max_bytes then break end
    if id ~= ARGV[7] then
      local _, st = listed(id)
      local key = ARGV[16] .. id
      local gone = redis.call('EXISTS', key) == 0
      if gone or st == 3 or st == 4 or st == 5 or st == 7 then
        forget(id)
        count = count - 1
        if not gone then redis.call('DEL', key, ARGV[17] .. id) end
      end
    end
  end
  if count > max_tasks or total - old + size > max_bytes then
    redis.call('SET', KEYS[6], total)
    if count > max_tasks then return -2 end
    return -3
  end
end
version = version + 1
redis.call('HSET', KEYS[1], 'v', version, 's', ARGV[5], 'd', ARGV[1], 'e', events)
redis.call('PEXPIRE', KEYS[1], ttl)
redis.call('ZADD', KEYS[2], now, ARGV[7])
redis.call('HSET', KEYS[5], ARGV[7], size .. ':' .. ARGV[5] .. ':' .. ARGV[15] .. ':' .. ARGV[4] .. ':' .. ARGV[9])
redis.call('SET', KEYS[6], total - old + size)
if version == 1 and ARGV[9] ~= '' then
  redis.call('ZADD', KEYS[3], now, ARGV[7])
  redis.call('ZREMRANGEBYRANK', KEYS[3], 0, -tonumber(ARGV[10]) - 1)
  redis.call('PEXPIRE', KEYS[3], ttl)
end
if ARGV[11] ~= '' then
  redis.call('XADD', KEYS[4], 'MAXLEN', '~', ARGV[12], '*', 'v', version, 'd', ARGV[11])
  redis.call('PEXPIRE', KEYS[4], ARGV[13])
end
return version
"""
# A delete: the task, its events, and its share of the key's quota. KEYS as _SAVE's but the context.
_DELETE = """
local meta = redis.call('HGET', KEYS[5], ARGV[1])
if meta then
  redis.call('DECRBY', KEYS[6], tonumber(string.match(meta, '^(%d+):')))
  redis.call('HDEL', KEYS[5], ARGV[1])
end
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('DEL', KEYS[1], KEYS[4])
return 1
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
    """Redis's failures (a timeout, a lost connection, its memory full) as A2A's internal error
    with a message of ours: its own text names the store's address. The detail goes to the log."""

    @functools.wraps(method)
    async def guarded(*args: object, **kwargs: object) -> object:
        try:
            return await method(*args, **kwargs)
        except RedisError as exc:
            logger.warning("A2A task store: %s failed: %s", method.__name__, exc)
            raise InternalError(STORE_DOWN) from None

    return cast("_Method", guarded)


class RedisTaskStore(VersionedTaskStore):
    """Tasks in Redis, shared by the replicas: each task a hash (its protobuf bytes, its state,
    its version, the bytes of its events) that expires `ttl` seconds after its last save; each
    key's tasks an index (a sorted set by time of save), a listing (a hash of what ListTasks
    filters and orders by, and each task's size) and a byte total, for its quota and ListTasks;
    each task's events a Stream (`events_key`: {v: the version the event made, d: the event as
    A2A's StreamResponse bytes}, MAX_EVENTS at most, gone EVENTS_KEPT_SECONDS after the last), as
    a2a-sdk's SQL store keeps its task_events.

    Versioned, as a2a-sdk's cluster mode has it: a save from a stale read is refused
    (ConcurrentTaskModificationError), so that a task canceled on one replica while it runs on
    another ends there too: the running replica's next save is refused, it reads the task
    again, finds it canceled, and stops its run."""

    def __init__(
        self,
        redis: Any,
        ttl: float,
        *,
        max_tasks_per_key: int,
        max_bytes_per_key: int,
        prefix: str = REDIS_PREFIX,
    ) -> None:
        self.redis = redis  # a redis.asyncio.Redis
        self.ttl_ms = max(int(ttl * 1000), 1)
        self.max_tasks_per_key = max_tasks_per_key
        self.max_bytes_per_key = max_bytes_per_key
        self.prefix = prefix
        self._save = redis.register_script(_SAVE)
        self._delete = redis.register_script(_DELETE)

    def _task_key(self, owner: str, task_id: str) -> str:
        return f"{self.prefix}task:{owner}:{task_id}"

    def _index_key(self, owner: str) -> str:
        return f"{self.prefix}tasks:{owner}"

    def _listing_key(self, owner: str) -> str:
        return f"{self.prefix}listing:{owner}"

    def _bytes_key(self, owner: str) -> str:
        return f"{self.prefix}bytes:{owner}"

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
        listed = Listed.of(task)
        version = await self._save(
            keys=[
                self._task_key(owner, task.id),
                self._index_key(owner),
                self._context_key(owner, task.context_id),
                self.events_key(task.id),
                self._listing_key(owner),
                self._bytes_key(owner),
            ],
            args=[
                task.SerializeToString(),
                _number(prev_version),
                self.ttl_ms,
                int(time.time() * 1000),
                int(task.status.state),
                "1" if canceling else "0",
                task.id,
                self.max_tasks_per_key,
                task.context_id,
                MAX_CONTEXT_TASKS,
                b"" if event is None else to_stream_response(event).SerializeToString(),
                MAX_EVENTS,
                int(EVENTS_KEPT_SECONDS * 1000),
                self.max_bytes_per_key,
                "" if listed.timestamp_ns is None else str(listed.timestamp_ns),
                self._task_key(owner, ""),
                self.events_key(""),
                REDIS_ENTRY_BYTES,
                QUOTA_SLACK_BYTES,
            ],
        )
        version = int(version)
        if version == -1:
            raise ConcurrentTaskModificationError(task.id)
        if version < 0:
            logger.warning("A2A task store: a save past its key's quota refused (%s)", -version)
            raise quota_error(version == -2, max_tasks=self.max_tasks_per_key, max_bytes=self.max_bytes_per_key)
        return TaskVersion(version)

    @_store_errors_hidden
    async def get(self, task_id: str, context: ServerCallContext) -> StoredTask | None:
        found = await self.redis.hmget(self._task_key(_owner(context), task_id), ["v", "d"])
        if found[1] is None:
            return None
        return StoredTask(_parsed(found[1]), TaskVersion(int(found[0])))

    @_store_errors_hidden
    async def list(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        # What the key's listing says of each task (a few dozen bytes a task, at most
        # ASSIST_A2A_MAX_TASKS_PER_KEY of them), then the page's tasks alone.
        owner = _owner(context)
        live_after_ms = int(time.time() * 1000) - self.ttl_ms
        listing = await self.redis.hgetall(self._listing_key(owner))
        listed = [
            entry
            for entry in (_listed(_text(task_id), _text(meta), live_after_ms) for task_id, meta in listing.items())
            if entry is not None
        ]
        del listing
        page = page_of(listed, params)
        async with self.redis.pipeline(transaction=False) as pipe:
            for task_id in page.ids:
                pipe.hget(self._task_key(owner, task_id), "d")
            found = await pipe.execute() if page.ids else []
        return ListTasksResponse(
            tasks=[_parsed(raw) for raw in found if raw is not None],
            next_page_token=page.next_page_token,
            total_size=page.total_size,
            page_size=page.page_size,
        )

    @_store_errors_hidden
    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        owner = _owner(context)
        await self._delete(
            keys=[
                self._task_key(owner, task_id),
                self._index_key(owner),
                "",
                self.events_key(task_id),
                self._listing_key(owner),
                self._bytes_key(owner),
            ],
            args=[task_id],
        )


def _listed(task_id: str, meta: str, live_after_ms: int) -> Listed | None:
    """A task of the key's listing ("size:state:status time:saved:context id"); None once expired."""
    _size, state, stamp, saved, context_id = meta.split(":", 4)
    if int(saved) <= live_after_ms:
        return None
    return Listed(task_id, context_id, int(state), int(stamp) if stamp else None)


def _number(version: TaskVersion) -> int:
    """A version of this store, as the number it wraps (TaskVersion hashes by its value, and
    the hash of a small int is the int)."""
    return 0 if version.is_missing else hash(version)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
