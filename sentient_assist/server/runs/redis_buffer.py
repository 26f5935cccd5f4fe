"""RedisRuns: the replicas' resumable runs in Redis Streams, through redis-py's asyncio client.

Per run (the braces keep a run's keys in one Redis Cluster slot):

    assist:run:{H}:events    a Stream: one entry per batch of events, {i: their ids, comma-separated,
                             f: their SSE frames, one after the other[, e: 1 when `done` is the last]},
                             entry ids `<its first event id's millisecond>-<that event's index>` (a
                             Last-Event-ID is found by one XREVRANGE from its millisecond down);
                             MAXLEN-bounded
    assist:run:{H}:meta      a Hash: key (a digest of the key that started it), owner, source, state
    assist:run:{H}:attached  set (with an expiry) by a reader on another replica, while it reads

per key (its owner O, a digest of the key; "" without keys), its quota, in keys with no expiry
(no volatile-* eviction drops them, docs/deploying.md#redis), pruned of the runs expired since
at each new run:

    assist:owner:{O}:runs    a sorted set: its runs' handles, each scored by when its keys expire
    assist:owner:{O}:bytes   a hash: each run's bytes written, and their total (the field "")

and per replica: `assist:replica:{R}:alive` (its heartbeat, with an expiry of
ASSIST_RUN_HEARTBEAT_TIMEOUT) and `assist:replica:{R}:stops` (handles to stop, from a DELETE
that reached another replica). Every key expires: a run's after the retention once it is
done, and at the latest ASSIST_REQUEST_TIMEOUT + ASSIST_DETACH_GRACE + the retention after it began.

Writes are batched: one task per replica takes what every run sent in the last
WRITE_INTERVAL_SECONDS and sends it in one pipeline, one XADD per run, so a token is neither a
round trip nor a command of its own. A reader follows
with XREAD BLOCK from the last entry it had: nothing published between a read and the next
is missed, and the last entry (`done`) is read like any other.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import Callable
from typing import Any

from sentient_assist.runtime.errors import QuotaReached, StoreUnavailable, UnknownEventId
from sentient_assist.server.runs.buffer import SharedRun, SharedRuns
from sentient_assist.server.runs.closing import LOST_MESSAGE, STORE_LOST_MESSAGE, closing_frames, ulid_ms
from sentient_assist.server.runs.kept import Item, KeptRun

try:
    from redis.exceptions import RedisError

    from sentient_assist.server.redis_readers import READ_BLOCK_SECONDS, readers_client
except ImportError as exc:  # pragma: no cover - the extra is missing
    raise ImportError(
        "ASSIST_REDIS_URL is set: resumable runs keep their frames in Redis, which needs the redis package:"
        " pip install 'sentient-assist[redis]'"
    ) from exc

logger = logging.getLogger("sentient_assist.server")

# One replica's connections to Redis (the writer, the heartbeat, and the readers following a run
# of another replica, each blocked in XREAD for at most READ_BLOCK_SECONDS at a time) are one
# pool of redis_readers.MAX_CONNECTIONS; past it a reader waits up to its POOL_WAIT_SECONDS.
READ_COUNT = 1000
# Entries past ASSIST_RUN_MAX_EVENTS a stream may take: the closing events of a run ended at its bound.
MAXLEN_SLACK = 64
# What the writer gathers before a write: a run sending a token every 20 ms has 2 or 3 in each
# XADD. A resume on another replica sees an event this long (and a round trip) after it was sent.
WRITE_INTERVAL_SECONDS = 0.05
# How long a resume waits for an id the replica running the run sent but has not written yet.
WRITE_WAIT_SECONDS = 2.0
# Entries looked at, from the Last-Event-ID's millisecond down, for the one that holds it.
FIND_COUNT = 64
_LAST_SEQ = "18446744073709551615"

RUNNING, DONE, BROKEN = "running", "done", "broken"  # BROKEN: frames were lost on the way to Redis
# What an entry costs Redis beside its ids and frames (MEMORY USAGE of a run's stream), counted
# with them under ASSIST_RUNS_MAX_BYTES_PER_KEY; and a run's hash and its places in the quota's keys.
ENTRY_BYTES = 64
RUN_BYTES = 512
COUNT_SETTING, BYTES_SETTING = "ASSIST_RUNS_MAX_PER_KEY", "ASSIST_RUNS_MAX_BYTES_PER_KEY"

# A new run of a key: its runs expired since are pruned, then it takes a place unless the key
# holds ASSIST_RUNS_MAX_PER_KEY runs or ASSIST_RUNS_MAX_BYTES_PER_KEY bytes. KEYS: the key's runs,
# its bytes. ARGV: the handle, now (ms), when its keys expire at the latest, the two quotas, the
# bytes of a run. Returns {1}, or {-1 or -2 (count, bytes), ms until its first run expires}.
_RESERVE = """
local now = tonumber(ARGV[2])
for _, handle in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now)) do
  redis.call('HINCRBY', KEYS[2], '', -tonumber(redis.call('HGET', KEYS[2], handle) or '0'))
  redis.call('HDEL', KEYS[2], handle)
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local refused = 0
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[4]) then
  refused = -1
elseif tonumber(redis.call('HGET', KEYS[2], '') or '0') + tonumber(ARGV[6]) > tonumber(ARGV[5]) then
  refused = -2
end
if refused < 0 then
  local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  return {refused, first[2] and (tonumber(first[2]) - now) or 1000}
end
redis.call('ZADD', KEYS[1], ARGV[3], ARGV[1])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[6])
redis.call('HINCRBY', KEYS[2], '', ARGV[6])
return {1}
"""


def split_frames(joined: bytes) -> list[bytes]:
    """The frames of an entry: each ends with its blank line, and none holds one (a frame's
    data is one line of JSON)."""
    return [frame + b"\n\n" for frame in joined.split(b"\n\n")[:-1]]


def _key(handle: str, part: str) -> str:
    return f"assist:run:{{{handle}}}:{part}"


def _seconds(ms: Any) -> int:
    """Whole seconds for a Retry-After, at least one."""
    return max(1, -(-int(ms) // 1000))


def _owner_key(owner: str, part: str) -> str:
    return f"assist:owner:{{{owner}}}:{part}"


class RedisRuns(SharedRuns):
    name = "redis"

    def __init__(
        self,
        url: str,
        *,
        retention: float,
        max_events: int,
        heartbeat_timeout: float,
        run_ttl: float,
        on_stop: Callable[[str], None],
        max_runs_per_key: int,
        max_bytes_per_key: int,
        on_past_quota: Callable[[str, str, int], None],
    ) -> None:
        self.redis: Any = readers_client(url)
        self.replica = secrets.token_hex(8)
        self.retention_ms = max(1, int(retention * 1000))
        self.run_ttl_ms = max(1, int(run_ttl * 1000))
        self.max_len = max_events + MAXLEN_SLACK
        self.heartbeat_ms = max(1, int(heartbeat_timeout * 1000))
        self.heartbeat_every = heartbeat_timeout / 4
        self._on_stop = on_stop
        self.max_runs_per_key = max_runs_per_key
        self.max_bytes_per_key = max_bytes_per_key
        self._on_past_quota = on_past_quota  # (handle, setting, limit): a running run that took its key past
        self._reserve = self.redis.register_script(_RESERVE)
        self._reserved: set[str] = set()  # the handles of this replica's runs that took a place
        self._pending: dict[KeptRun, list[Item]] = {}
        self._ended: list[KeptRun] = []
        self._written: dict[str, int] = {}  # entries written per running run: the index in the next entry id
        self._broken: set[str] = set()  # runs whose frames did not all reach Redis: to be marked so
        self._wake: asyncio.Event | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self.up = False

    # The replica's side: its heartbeat and the writer.

    async def start(self) -> None:
        if self._tasks:
            return
        self._wake = asyncio.Event()
        await self._beat()
        if not self.up:
            logger.warning(
                "resumable runs are off: Redis (ASSIST_REDIS_URL) does not answer; plain streams are served,"
                " and Redis is tried again every %.1f s",
                self.heartbeat_every,
            )
        else:
            logger.info("resumable runs are kept in Redis (replica %s)", self.replica)
        self._tasks = [
            asyncio.create_task(self._heartbeat_loop(), name="assist: resumable runs' heartbeat"),
            asyncio.create_task(self._write_loop(), name="assist: resumable runs' writer"),
        ]

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            try:
                await task
            except (asyncio.CancelledError, Exception):
                pass
        self._tasks = []
        try:
            # What the runs sent since the last write (their `done`, at a shutdown), then the heartbeat goes.
            pending, self._pending = self._pending, {}
            ended, self._ended = self._ended, []
            await self._write(pending, ended)
            await self.redis.delete(f"assist:replica:{{{self.replica}}}:alive")
        except (RedisError, OSError):
            pass
        await self.redis.aclose()  # and its pool

    def _set_up(self, up: bool, why: str = "") -> None:
        if not self._tasks:  # the first beat, at start: start() says how it went
            self.up = up
            return
        if up and not self.up:
            logger.warning("Redis (ASSIST_REDIS_URL) answers: resumable runs are on")
        elif not up and self.up:
            logger.warning("Redis (ASSIST_REDIS_URL) does not answer (%s): new runs are not resumable", why)
        self.up = up

    async def _beat(self) -> None:
        alive = f"assist:replica:{{{self.replica}}}:alive"
        stops = f"assist:replica:{{{self.replica}}}:stops"
        try:
            pipe = self.redis.pipeline(transaction=False)
            pipe.set(alive, b"1", px=self.heartbeat_ms)
            pipe.lrange(stops, 0, -1)
            pipe.delete(stops)
            for handle in self._broken:
                pipe.hset(_key(handle, "meta"), "state", BROKEN)
            _, handles, _, *_ = await pipe.execute()
        except (RedisError, OSError) as exc:
            self._set_up(False, type(exc).__name__)
            return
        self._broken.clear()
        self._set_up(True)
        for handle in handles:
            self._on_stop(handle.decode(errors="replace"))

    async def _heartbeat_loop(self) -> None:
        while True:
            await asyncio.sleep(self.heartbeat_every)
            await self._beat()

    async def reserve(self, handle: str, owner: str) -> None:
        now = int(time.time() * 1000)
        try:
            reply = await self._reserve(
                keys=[_owner_key(owner, "runs"), _owner_key(owner, "bytes")],
                args=[handle, now, now + self.run_ttl_ms, self.max_runs_per_key, self.max_bytes_per_key, RUN_BYTES],
            )
        except (RedisError, OSError) as exc:
            self._set_up(False, type(exc).__name__)
            return
        refused = int(reply[0])
        if refused == -1:
            raise QuotaReached(COUNT_SETTING, self.max_runs_per_key, _seconds(reply[1]))
        if refused == -2:
            raise QuotaReached(BYTES_SETTING, self.max_bytes_per_key, _seconds(reply[1]))
        self._reserved.add(handle)

    async def created(self, kept: KeptRun) -> bool:
        """Its hash written now, before its response starts: a resume anywhere finds the run as
        soon as its client can know the handle."""
        if kept.handle not in self._reserved:
            return False  # it took no place under its key's quota (Redis did not answer then)
        meta = _key(kept.handle, "meta")
        mapping = {"key": kept.key_digest, "owner": self.replica, "source": kept.source, "state": RUNNING}
        try:
            pipe = self.redis.pipeline(transaction=False)
            pipe.hset(meta, mapping=mapping)
            pipe.pexpire(meta, self.run_ttl_ms)
            await pipe.execute()
        except (RedisError, OSError) as exc:
            self._reserved.discard(kept.handle)
            self._set_up(False, type(exc).__name__)
            return False
        self._written[kept.handle] = 0
        return True

    def appended(self, kept: KeptRun, items: list[Item]) -> None:
        pending = self._pending.get(kept)
        if pending is None:
            self._pending[kept] = list(items)
        else:
            pending.extend(items)
        self._poke()

    def ended(self, kept: KeptRun) -> None:
        self._ended.append(kept)
        self._poke()

    def _poke(self) -> None:
        if self._wake is not None:
            self._wake.set()

    async def _write_loop(self) -> None:
        assert self._wake is not None
        while True:
            await self._wake.wait()
            await asyncio.sleep(WRITE_INTERVAL_SECONDS)  # what comes meanwhile goes in the same write
            self._wake.clear()
            pending, self._pending = self._pending, {}
            ended, self._ended = self._ended, []
            try:
                await self._write(pending, ended)
            except (RedisError, OSError) as exc:
                # What was not written can never be: a resume elsewhere would miss it. These runs go
                # on here, for their own readers; the store is told they are broken when it answers.
                runs = {kept.handle for kept in (*pending, *ended)}
                self._broken.update(handle for handle in runs if handle in self._written)
                for handle in runs:
                    self._written.pop(handle, None)
                logger.warning(
                    "Redis did not take the frames of %d run(s) (%s): they cannot be resumed on another replica",
                    len(runs),
                    type(exc).__name__,
                )
                self._set_up(False, type(exc).__name__)
            except Exception:
                logger.exception("writing resumable runs to Redis failed")

    async def _write(self, pending: dict[KeptRun, list[Item]], ended: list[KeptRun]) -> None:
        written = self._written
        pipe = self.redis.pipeline(transaction=False)
        owners: list[str] = []  # the run of each command, for the one a command fails for
        totals: dict[int, KeptRun] = {}  # the command whose reply is a key's bytes after a run's write

        def add(handle: str, command: Callable[..., Any], *args: Any, **options: Any) -> None:
            command(*args, **options)
            owners.append(handle)

        for kept, items in pending.items():
            index = written.get(kept.handle)
            if index is None:
                continue  # broken already
            events = _key(kept.handle, "events")
            fields: dict[Any, Any] = {
                "i": ",".join(item[0] for item in items),
                "f": b"".join(item[1] for item in items),
            }
            if items[-1][2]:
                fields["e"] = b"1"
            entry_id = f"{ulid_ms(items[0][0])}-{index}"
            add(kept.handle, pipe.xadd, events, fields, id=entry_id, maxlen=self.max_len, approximate=True)
            if index == 0:
                add(kept.handle, pipe.pexpire, events, self.run_ttl_ms)
            written[kept.handle] = index + len(items)
            # Its share of its key's quota; a run that takes the key past it is ended (its end is written).
            size = len(fields["i"]) + len(fields["f"]) + ENTRY_BYTES
            sizes = _owner_key(kept.owner, "bytes")
            add(kept.handle, pipe.hincrby, sizes, kept.handle, size)
            totals[len(owners)] = kept
            add(kept.handle, pipe.hincrby, sizes, "", size)
        for kept in ended:
            self._reserved.discard(kept.handle)
            if written.pop(kept.handle, None) is None:
                continue
            meta, events = _key(kept.handle, "meta"), _key(kept.handle, "events")
            add(kept.handle, pipe.hset, meta, "state", DONE)
            add(kept.handle, pipe.pexpire, meta, self.retention_ms)
            add(kept.handle, pipe.pexpire, events, self.retention_ms)
            expires = int(time.time() * 1000) + self.retention_ms
            add(kept.handle, pipe.zadd, _owner_key(kept.owner, "runs"), {kept.handle: expires}, xx=True)
        if not owners:
            return
        results = await pipe.execute(raise_on_error=False)
        for at, kept in totals.items():
            total = results[at]
            if isinstance(total, int) and total > self.max_bytes_per_key and not kept.ended:
                self._on_past_quota(kept.handle, BYTES_SETTING, self.max_bytes_per_key)
        failed = {handle for handle, result in zip(owners, results, strict=True) if isinstance(result, Exception)}
        for handle in failed:
            # Refused by Redis (its memory full, say, or the run ended as lost by another replica):
            # that run is not written to any more; the others go on.
            logger.warning("Redis refused the frames of run %s...: it cannot be resumed on another replica", handle[:6])
            if written.pop(handle, None) is not None:
                self._broken.add(handle)

    # Another replica's side: finding a run, following it, stopping it.

    async def find(self, handle: str) -> SharedRun | None:
        try:
            meta = await self.redis.hgetall(_key(handle, "meta"))
        except (RedisError, OSError) as exc:
            raise StoreUnavailable(type(exc).__name__) from None
        if not meta:
            return None
        state = meta.get(b"state", b"").decode()
        if state == BROKEN:
            raise StoreUnavailable("the run's frames did not all reach Redis")
        return SharedRun(
            handle=handle,
            key_digest=meta.get(b"key", b"").decode(),
            owner=meta.get(b"owner", b"").decode(),
            ended=state != RUNNING,
        )

    async def source(self, run: SharedRun, after_id: str | None, ping: float) -> RedisSource:
        if after_id is None:
            return RedisSource(self, run, "0-0", None, [], False)
        cursor, rest, ended = await self._entry_of(run, after_id)
        return RedisSource(self, run, cursor, after_id, rest, ended)

    async def _entry_of(self, run: SharedRun, event_id: str) -> tuple[str, list[bytes], bool]:
        """The entry that holds `event_id`, the frames after it in that entry, and whether that
        entry ends the run. Waits a little for a run still running, whose replica may have sent
        the event to its client before writing it here (WRITE_INTERVAL_SECONDS)."""
        events = _key(run.handle, "events")
        event_id = event_id.upper()
        try:
            ms = ulid_ms(event_id)
        except ValueError:
            raise UnknownEventId(event_id) from None
        deadline = time.monotonic() + WRITE_WAIT_SECONDS
        while True:
            try:
                entries = await self.redis.xrevrange(events, f"{ms}-{_LAST_SEQ}", "-", count=FIND_COUNT)
            except (RedisError, OSError) as exc:
                raise StoreUnavailable(type(exc).__name__) from None
            for entry_id, fields in entries:
                ids = fields.get(b"i", b"").decode().split(",")
                if event_id in ids:
                    frames = split_frames(fields[b"f"])
                    return entry_id.decode(), frames[ids.index(event_id) + 1 :], b"e" in fields
                if ids[0] < event_id:
                    break  # entries only go further back from here
            if run.ended or time.monotonic() > deadline:
                raise UnknownEventId(event_id)
            await asyncio.sleep(0.05)

    async def request_stop(self, run: SharedRun) -> None:
        stops = f"assist:replica:{{{run.owner}}}:stops"
        try:
            pipe = self.redis.pipeline(transaction=False)
            pipe.rpush(stops, run.handle)
            pipe.pexpire(stops, self.heartbeat_ms)
            await pipe.execute()
        except (RedisError, OSError) as exc:
            raise StoreUnavailable(type(exc).__name__) from None

    async def attached_elsewhere(self, handle: str) -> bool:
        try:
            return bool(await self.redis.exists(_key(handle, "attached")))
        except (RedisError, OSError):
            return False

    async def owner_alive(self, owner: str) -> bool:
        return bool(await self.redis.exists(f"assist:replica:{{{owner}}}:alive"))

    async def end_lost_run(self, run: SharedRun, source: str) -> None:
        """The run's replica is gone: one reader (the first to claim it) writes its `error` and
        `done`, after the last entry; every reader then reads them as any other entries."""
        meta, events = _key(run.handle, "meta"), _key(run.handle, "events")
        if not await self.redis.hsetnx(meta, "lost_by", self.replica):
            return
        last = await self.redis.xrevrange(events, "+", "-", count=1)
        if last:
            entry_id, fields = last[0]
            last_ms, last_index = (int(part) for part in entry_id.decode().split("-"))
            last_event: str | None = fields.get(b"i", b"").decode().rsplit(",", 1)[-1] or None
        else:
            last_ms, last_index, last_event = 0, -1, None
        closing = closing_frames(last_event, source, LOST_MESSAGE, "replica")
        fields_out = {
            "i": ",".join(event_id for event_id, _ in closing),
            "f": b"".join(f for _, f in closing),
            "e": b"1",
        }
        pipe = self.redis.pipeline(transaction=False)
        pipe.xadd(events, fields_out, id=f"{max(last_ms, ulid_ms(closing[0][0]))}-{last_index + 1}")
        pipe.hset(meta, "state", DONE)
        pipe.pexpire(meta, self.retention_ms)
        pipe.pexpire(events, self.retention_ms)
        await pipe.execute()
        logger.warning("run %s... lost with its replica %s: ended with an error", run.handle[:6], run.owner)


class RedisSource:
    """Follows a run in Redis from the entry after `cursor`: XREAD BLOCK, a second at a time,
    and between reads that found nothing, whether the run's replica still beats."""

    __slots__ = (
        "_runs",
        "_run",
        "_cursor",
        "_last_event",
        "_source",
        "_rest",
        "_ended",
        "_closed",
        "_read",
        "_run_over",
    )

    def __init__(
        self, runs: RedisRuns, run: SharedRun, cursor: str, last_event: str | None, rest: list[bytes], ended: bool
    ) -> None:
        self._runs = runs
        self._run = run
        self._cursor = cursor
        self._last_event = last_event
        self._source = ""
        self._rest = rest  # the frames after Last-Event-ID in the entry that holds it: given first
        self._ended = ended and not rest
        self._closed = False
        self._read: asyncio.Future[Any] | None = None
        self._run_over = False  # the run is done: what is left is read without waiting, then the stream ends

    def close(self) -> None:
        """The client left: a read blocked in XREAD is given up now (its connection is dropped,
        and the pool makes a new one when needed), rather than held to the end of its block."""
        self._closed = True
        if self._read is not None and not self._read.done():
            self._read.cancel()

    async def next_batch(self, wait: float) -> list[bytes] | None:
        runs, handle = self._runs, self._run.handle
        events = _key(handle, "events")
        if self._rest:
            rest, self._rest = self._rest, []
            return rest
        deadline = time.monotonic() + wait
        while True:
            if self._closed or self._ended:
                return []
            block = None if self._run_over else max(1, int(min(READ_BLOCK_SECONDS, deadline - time.monotonic()) * 1000))
            pipe = runs.redis.pipeline(transaction=False)
            pipe.set(_key(handle, "attached"), b"1", px=runs.heartbeat_ms)
            pipe.xread({events: self._cursor}, count=READ_COUNT, block=block)
            self._read = read = asyncio.ensure_future(pipe.execute())
            try:
                _, reply = await read
            except asyncio.CancelledError:
                if not read.cancelled() or not self._closed:
                    raise  # this task itself is cancelled, not only the read
                return []
            except (RedisError, OSError):
                return self._end_here(STORE_LOST_MESSAGE, "store")
            finally:
                self._read = None
            if reply:
                frames: list[bytes] = []
                for entry_id, fields in reply[0][1]:
                    self._cursor = entry_id.decode()
                    frames.append(fields[b"f"])  # a batch of whole frames, written as they are
                    self._last_event = fields.get(b"i", b"").decode().rsplit(",", 1)[-1] or self._last_event
                    if b"e" in fields:
                        self._ended = True
                        break
                return frames
            if self._run_over:  # done, and nothing after the cursor: a resume from `done` itself, say
                self._ended = True
                return []
            try:
                ended = await self._check_run()
            except (RedisError, OSError):
                return self._end_here(STORE_LOST_MESSAGE, "store")
            if ended is not None:
                return ended
            if time.monotonic() >= deadline:
                return None

    async def _check_run(self) -> list[bytes] | None:
        """Nothing came: is the run still there, its replica still beating? Frames that end
        the stream here when it is gone; None while it goes on."""
        runs, run = self._runs, self._run
        meta = await runs.redis.hmget(_key(run.handle, "meta"), ["state", "source"])
        state, source = (value.decode() if value is not None else None for value in meta)
        self._source = source or self._source
        if state is None:  # expired, or Redis lost it: nothing more will come
            return self._end_here(LOST_MESSAGE, "expired")
        if state == BROKEN:
            return self._end_here(STORE_LOST_MESSAGE, "store")
        if state == DONE:
            # Written after its last entry: one more read (not blocked) takes what came since the last.
            self._run_over = True
        elif state == RUNNING and not await runs.owner_alive(run.owner):
            await runs.end_lost_run(run, self._source)  # its error and done are read next
        return None

    def _end_here(self, message: str, reason: str) -> list[bytes]:
        self._ended = True
        return [frame for _, frame in closing_frames(self._last_event, self._source or "assist", message, reason)]
