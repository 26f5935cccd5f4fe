"""DetachedRuns: the resumable runs of one /assist route, kept so that a client's connection
can come and go while the agent goes on.

    Run (agent task) -> ResumableHook: (id, frame, is done) -> its reader -> KeptRun (this process)
                                                                          -> SharedRuns (Redis), batched
    its reader: POST's response while its client is there (`take`), then a task (`read_detached`)
    other readers (GET resumes): a FrameSource each, from their cursor

A run whose last reader leaves goes on for ASSIST_DETACH_GRACE seconds, holding a place under
ASSIST_MAX_STREAMS (none free: it is stopped at once, as without resuming), then is stopped
unless a reader came back (here, or on another replica: its `attached` key in Redis).
Its time limit and the shutdown are kept as for any run (OpenStreams).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import secrets
from collections.abc import Callable
from typing import cast

from fastapi import HTTPException

from sentient_assist.protocol.events import DoneEvent, ErrorContent, ResponseEvent
from sentient_assist.protocol.request import Query
from sentient_assist.runtime.agent import AbstractAgent
from sentient_assist.runtime.channel import Channel
from sentient_assist.runtime.errors import QuotaReached
from sentient_assist.runtime.pauses import PauseSealer
from sentient_assist.runtime.run import ChannelHook, Run, RunOutcome, RunStats
from sentient_assist.runtime.run_input import NO_RUN_INPUT, RunInput
from sentient_assist.runtime.session import Session
from sentient_assist.server import metrics
from sentient_assist.server.auth import bearer_token, key_owner
from sentient_assist.server.limits import StreamGate
from sentient_assist.server.open_streams import CUT_OFF_AFTER_SECONDS, SHUTDOWN_MESSAGE, OpenStreams
from sentient_assist.server.runs.buffer import SharedRuns
from sentient_assist.server.runs.kept import Item, KeptRun
from sentient_assist.server.runs.memory import LocalRuns
from sentient_assist.server.settings import Settings

logger = logging.getLogger("sentient_assist.server")

RUN_HEADER = "Assist-Run"
HANDLE_BYTES = 24  # 192 random bits: a handle is as hard to guess as a key
STOPPED_MESSAGE = "The run was stopped by its client."
STOPPED_CODE = 499  # nginx's "client closed request": the client ended it
NOBODY_MESSAGE = "The run was stopped: no client was attached for ASSIST_DETACH_GRACE ({grace:g} s)."
BOUND_MESSAGE = "The run was ended: it passed {setting} ({limit} {unit} buffered for resuming)."
BOUND_CODE = 507
QUOTA_MESSAGE = "this key keeps its quota of resumable runs in Redis ({setting}: {limit}); retry later"


def key_digest(handle: str, authorization_token: str) -> str:
    """What a run keeps of the key that started it: an HMAC of the key under the run's handle,
    never the key (nor a digest that would match the key's in another run or store)."""
    return hmac.new(handle.encode(), authorization_token.encode("latin-1", "replace"), hashlib.sha256).hexdigest()


class ResumableHook(ChannelHook[Item]):
    """Puts each event on the channel as (its id, its SSE frame, whether it is `done`): the frame
    is the plain stream's (SseHook's), byte for byte. It keeps the run's bounds: an event past
    ASSIST_RUN_MAX_EVENTS or ASSIST_RUN_MAX_BYTES is not sent, the run is ended (`past_bound`)."""

    __slots__ = ("_max_events", "_max_bytes", "_events", "_bytes", "_past_bound")

    def __init__(
        self,
        channel: Channel[Item],
        stats: RunStats,
        max_events: int,
        max_bytes: int,
        past_bound: Callable[[str, int, str], None],
    ) -> None:
        super().__init__(channel, stats)
        self._max_events = max_events
        self._max_bytes = max_bytes
        self._events = 0
        self._bytes = 0
        self._past_bound = past_bound

    async def emit(self, event: ResponseEvent) -> None:
        if self._events >= self._max_events:
            self._past_bound("ASSIST_RUN_MAX_EVENTS", self._max_events, "events")
        elif self._bytes >= self._max_bytes:
            self._past_bound("ASSIST_RUN_MAX_BYTES", self._max_bytes, "bytes")
        await super().emit(event)  # once the run is ended: ResponseStreamClosedError, as after complete()

    def encode(self, event: ResponseEvent) -> Item:
        frame = event.sse_frame()
        self._events += 1
        self._bytes += len(frame)
        return (cast(str, event.id), frame, type(event) is DoneEvent)  # emit() gave it its id

    def size(self, item: Item) -> int:
        return len(item[1])


class DetachedRuns:
    """The resumable runs of one Service: where they run, and where they are kept."""

    def __init__(self, settings: Settings, gate: StreamGate, streams: OpenStreams) -> None:
        self.grace = settings.detach_grace
        self.ping_interval = settings.ping_interval
        self.time_limit = settings.request_timeout
        self.shutdown_grace = settings.shutdown_grace
        self.max_events = settings.run_max_events
        self.max_bytes = settings.run_max_bytes
        self.gate = gate
        self.streams = streams
        self.keyed = bool(settings.api_keys)  # without keys, a handle alone is what lets one in
        self.local = LocalRuns(settings.run_retention, settings.runs_max_bytes_total)
        self.shared: SharedRuns | None = None
        if settings.redis_url is not None:
            from sentient_assist.server.runs.redis_buffer import RedisRuns  # ImportError naming the extra

            self.shared = RedisRuns(
                settings.redis_url.get_secret_value(),
                retention=settings.run_retention,
                max_events=settings.run_max_events,
                heartbeat_timeout=settings.run_heartbeat_timeout,
                run_ttl=settings.request_timeout + settings.detach_grace + settings.run_retention + 60,
                on_stop=self._stop_requested,
                max_runs_per_key=settings.runs_max_per_key,
                max_bytes_per_key=settings.runs_max_bytes_per_key,
                on_past_quota=self._past_quota,
            )
        self._started = False

    async def start(self) -> None:
        """Connect to the shared store (once; the app's lifespan, or the first request)."""
        if self._started:
            return
        self._started = True
        if self.shared is not None:
            await self.shared.start()
        else:
            logger.info("resumable runs are kept in this process (no ASSIST_REDIS_URL)")

    async def close(self) -> None:
        """At shutdown (after the server's connections are closed): the runs going on detached
        get ASSIST_SHUTDOWN_GRACE to finish, as open streams do, then end with `error` 503 and
        `done`; all of it reaches the shared store before the heartbeat stops."""
        pumps = {kept.pump for kept in self.local.running() if kept.pump is not None and not kept.pump.done()}
        if pumps:
            await asyncio.wait(pumps, timeout=self.shutdown_grace)
        for kept in self.local.running():
            if kept.run is not None:
                details = {"request_id": kept.run.stats.request_id}
                error = ErrorContent(error_message=SHUTDOWN_MESSAGE, error_code=503, details=details)
                kept.run.stop(error, RunOutcome.SHUTDOWN)
        pumps = {kept.pump for kept in self.local.running() if kept.pump is not None and not kept.pump.done()}
        if pumps:
            await asyncio.wait(pumps, timeout=CUT_OFF_AFTER_SECONDS)
        if self.shared is not None and self._started:
            await self.shared.close()
        self._started = False

    async def available(self) -> bool:
        """Whether a new run can be resumable now: no shared store, or one that answers."""
        if not self._started:
            await self.start()
        return self.shared is None or self.shared.up

    def status(self) -> str:
        """For /readyz's body."""
        if self.shared is None:
            return "on (in this process)"
        return f"on ({self.shared.name})" if self.shared.up else f"off: {self.shared.name} does not answer"

    async def reserve(self, authorization: str | None) -> str:
        """The handle of a new run, with its place under its key's quota of the shared store
        taken (if there is one, and it answers): past the quota, 503 naming the setting, with
        Retry-After when the key's first run there expires; the other keys are served."""
        handle = secrets.token_urlsafe(HANDLE_BYTES)
        if self.shared is not None and self.shared.up:
            try:
                await self.shared.reserve(handle, key_owner(authorization) if self.keyed else "")
            except QuotaReached as reached:
                raise HTTPException(
                    503,
                    QUOTA_MESSAGE.format(setting=reached.setting, limit=reached.limit),
                    {"Retry-After": str(reached.retry_after)},
                ) from None
        return handle

    def digest_of(self, handle: str, authorization: str | None) -> str:
        return key_digest(handle, bearer_token(authorization) if self.keyed else "")

    def begin(
        self,
        agent: AbstractAgent,
        session: Session,
        query: Query,
        stats: RunStats,
        sealer: PauseSealer | None,
        authorization: str | None,
        handle: str,
    ) -> tuple[KeptRun, Run[Item]]:
        """Start the run of `query`, kept under `handle` (`reserve`'s). The caller (POST's
        response) is its first reader: it reads the run (`read`) while its client is there, and
        a pump task (`read_detached`) takes over when it leaves, so the run goes on."""
        kept = KeptRun(handle, self.digest_of(handle, authorization), session.processor_id)
        kept.owner = key_owner(authorization) if self.keyed else ""
        kept.readers = 1

        def make_hook(channel: Channel[Item], stats: RunStats) -> ResumableHook:
            return ResumableHook(
                channel, stats, self.max_events, self.max_bytes, lambda *bound: self._past_bound(kept, *bound)
            )

        # Its pauses are answered under its key alone.
        run_input = RunInput(caller=kept.owner) if kept.owner else NO_RUN_INPUT
        kept.run = Run(
            agent,
            session,
            query,
            watcher=self.streams,
            stats=stats,
            make_hook=make_hook,
            sealer=sealer,
            run_input=run_input,
        )
        self.local.add(kept)
        return kept, kept.run

    async def share(self, kept: KeptRun) -> None:
        """Make the run known to the other replicas (before its response starts), if there are any."""
        if self.shared is not None and self.shared.up and await self.shared.created(kept):
            kept.shared = self.shared

    def take(self, kept: KeptRun, run: Run[Item]) -> list[Item] | None:
        """What the run sent since the last take (Run.take_ready), kept for every reader."""
        batch = run.take_ready()
        if batch:
            kept.append(batch)
            if kept.shared is not None:
                kept.shared.appended(kept, batch)
        return batch

    def read_detached(self, kept: KeptRun) -> None:
        """The POST's client left with the run going on: a task reads it from now on."""
        run = kept.run
        if run is None:
            return
        kept.pump = asyncio.create_task(self._pump(kept, run), name="assist: a detached run")

    async def _pump(self, kept: KeptRun, run: Run[Item]) -> None:
        try:
            while True:
                batch = self.take(kept, run)
                if batch is None:
                    await run.ready()
                elif not batch:
                    break
        finally:
            self.finish(kept, run)

    def finish(self, kept: KeptRun, run: Run[Item]) -> None:
        """The run has ended (or its last reader was cut off): kept for the retention from now."""
        if kept.run is None:
            return
        run.reader_left()
        kept.end()
        kept.run = None
        self._release_place(kept)
        if kept.grace_timer is not None:
            kept.grace_timer.cancel()
            kept.grace_timer = None
        self.local.ended(kept)
        if kept.shared is not None:
            kept.shared.ended(kept)
        metrics.observe_stream(run.stats)

    def _past_bound(self, kept: KeptRun, setting: str, limit: int, unit: str) -> None:
        if kept.run is None or kept.stopping:
            return
        logger.warning("run %s... passed %s: ended", kept.handle[:6], setting)
        message = BOUND_MESSAGE.format(setting=setting, limit=limit, unit=unit)
        details = {"request_id": kept.run.stats.request_id, "limit": setting}
        self._stop(kept, ErrorContent(error_message=message, error_code=BOUND_CODE, details=details))

    def _past_quota(self, handle: str, setting: str, limit: int) -> None:
        """A run of this replica took its key past its quota of the shared store: it ends."""
        kept = self.local.get(handle)
        if kept is not None:
            self._past_bound(kept, setting, limit, "bytes")

    # Readers coming and going.

    def attach(self, kept: KeptRun) -> None:
        kept.readers += 1
        if kept.grace_timer is not None:
            kept.grace_timer.cancel()
            kept.grace_timer = None

    def detach(self, kept: KeptRun) -> None:
        kept.readers -= 1
        if kept.readers > 0 or kept.ended or kept.run is None:
            return
        if not kept.holds_place:
            if not self.gate.take(kept.owner):
                # No room to go on unattended (or its key holds its share): ended as a run without resuming would be.
                kept.run.stop(outcome=RunOutcome.DISCONNECTED)
                return
            kept.holds_place = True
        self._wait_for_a_reader(kept, self.grace)

    def _wait_for_a_reader(self, kept: KeptRun, seconds: float) -> None:
        if kept.grace_timer is not None:
            kept.grace_timer.cancel()
        kept.grace_timer = asyncio.get_running_loop().call_later(seconds, self._grace_over, kept)

    def _grace_over(self, kept: KeptRun) -> None:
        kept.grace_timer = None
        if kept.readers > 0 or kept.ended:
            return
        if self.shared is not None and self.shared.up:
            task = asyncio.ensure_future(self._stop_unless_attached_elsewhere(kept))
            kept.grace_timer = None
            task.add_done_callback(lambda done: done.exception() if not done.cancelled() else None)
            return
        self._stop_nobody_attached(kept)

    async def _stop_unless_attached_elsewhere(self, kept: KeptRun) -> None:
        assert self.shared is not None
        if await self.shared.attached_elsewhere(kept.handle):
            if not kept.ended and kept.readers == 0:
                self._wait_for_a_reader(kept, max(0.5, self.ping_interval / 4, 1.0))
            return
        if kept.readers == 0:
            self._stop_nobody_attached(kept)

    def _stop_nobody_attached(self, kept: KeptRun) -> None:
        if kept.run is None or kept.ended:
            return
        logger.info("run %s... stopped: no client attached for ASSIST_DETACH_GRACE", kept.handle[:6])
        details = {"request_id": kept.run.stats.request_id, "stopped": "detached"}
        error = ErrorContent(
            error_message=NOBODY_MESSAGE.format(grace=self.grace), error_code=STOPPED_CODE, details=details
        )
        self._stop(kept, error)

    def _release_place(self, kept: KeptRun) -> None:
        if kept.holds_place:
            kept.holds_place = False
            self.gate.give_back(kept.owner)

    # Stopping.

    def stop(self, kept: KeptRun) -> None:
        """DELETE: the run ends now with the stop's `error`, then `done`."""
        if kept.run is None or kept.ended:
            return
        details = {"request_id": kept.run.stats.request_id, "stopped": "client"}
        self._stop(kept, ErrorContent(error_message=STOPPED_MESSAGE, error_code=STOPPED_CODE, details=details))

    def _stop(self, kept: KeptRun, error: ErrorContent) -> None:
        run = kept.run
        if run is None or kept.stopping:
            return
        kept.stopping = True
        run.stop(error, RunOutcome.STOPPED)

    def _stop_requested(self, handle: str) -> None:
        """A DELETE that reached another replica, passed on by the shared store."""
        kept = self.local.get(handle)
        if kept is not None:
            self.stop(kept)
