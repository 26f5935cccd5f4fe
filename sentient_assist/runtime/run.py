"""One run of an agent: its task, the guarantees around it, and the events it sends, in order.

    agent.assist() -> ResponseHandler -> ChannelHook (id, encode) -> Channel
        -> take_ready() / ready(): the server's writer, and the in-process facade alike

The server encodes each event to its SSE frame; the in-process facade keeps the
event objects. Either way the run ends with exactly one `done`, whatever the
agent does: raising, timing out, returning without `complete()`, or raising
CancelledError of its own accord (`Run._after_agent` reads how its task ended).
Its time limit is kept by a RunWatcher (sentient_assist/runtime/watcher.py), whoever reads it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from enum import StrEnum
from functools import partial
from typing import Generic, TypeVar, cast

from sentient_assist.protocol.events import DoneEvent, ErrorContent, ResponseEvent
from sentient_assist.protocol.request import Query
from sentient_assist.runtime.agent import AbstractAgent
from sentient_assist.runtime.channel import Channel
from sentient_assist.runtime.errors import AgentError, CallRefused, ResponseStreamClosedError
from sentient_assist.runtime.ids import MonotonicUlid
from sentient_assist.runtime.pauses import (
    PROCESS_SEALER,
    PauseContext,
    PauseRefused,
    PauseSealer,
    Resumption,
    claim,
    pause_holder,
    resumption_of,
)
from sentient_assist.runtime.request_context import context_for_request, current_sealer
from sentient_assist.runtime.response_handler import ResponseHandler
from sentient_assist.runtime.run_input import NO_RUN_INPUT, RunInput
from sentient_assist.runtime.session import Session
from sentient_assist.runtime.watcher import RunWatcher
from sentient_assist.tracing import current_tracing

logger = logging.getLogger("sentient_assist.run")

# Items, and bytes of them, waiting to be taken before a fast agent has to wait: backpressure.
CHANNEL_CAPACITY = 256
CHANNEL_MAX_BYTES = 1 << 20

AGENT_FAILED_MESSAGE = "The agent failed while answering. The error has been logged."
TIMEOUT_MESSAGE = "The agent did not finish within the request time limit."

T = TypeVar("T")
Received = TypeVar("Received")  # what the listener of `client_left` waits for: an ASGI message


class RunOutcome(StrEnum):
    """How a run ended, as the access log and the metrics tell it."""

    OPEN = "open"  # not ended yet
    COMPLETED = "completed"  # its reader took everything, `done` included
    DISCONNECTED = "disconnected"  # its reader left first
    SHUTDOWN = "shutdown"  # ended by the server shutting down
    CUT_OFF = "cut_off"  # ended, but its reader was stuck (a client that stopped reading) and was cancelled
    STOPPED = "stopped"  # ended on purpose while it ran detached: DELETE, a buffer bound, nobody attached


def _why_cancelled(stats: RunStats) -> str:
    """What cancelled a run's agent, for its span: its time limit, or how its run was ended."""
    if stats.timed_out:
        return "time_limit"
    if stats.outcome is RunOutcome.OPEN or stats.outcome is RunOutcome.COMPLETED:
        return "cancelled"
    return stats.outcome.value


class RunStats:
    """What happened in one run, for logs and metrics: counts, never contents."""

    __slots__ = ("request_id", "events_by_type", "outcome", "agent_failed", "timed_out", "started")

    def __init__(self, request_id: str) -> None:
        self.request_id = request_id
        self.events_by_type: defaultdict[str, int] = defaultdict(int)
        self.outcome = RunOutcome.OPEN
        self.agent_failed = False
        self.timed_out = False
        self.started = time.monotonic()

    @property
    def events(self) -> int:
        return sum(self.events_by_type.values())


class ChannelHook(Generic[T]):
    """Stamps each event with a monotonic ULID, encodes it once, and puts it on a channel.

    The base class puts the event itself; the server's hook puts its SSE frame.
    """

    __slots__ = ("_channel", "_next_id", "_counts")

    def __init__(self, channel: Channel[T], stats: RunStats) -> None:
        self._channel = channel
        self._next_id: MonotonicUlid | None = None  # made with the first event: a waiting run holds none
        self._counts = stats.events_by_type

    def encode(self, event: ResponseEvent) -> T:
        return cast(T, event)  # the base hook puts the event itself: a ChannelHook[ResponseEvent]

    def size(self, item: T) -> int:
        """The bytes `item` holds, for the channel's bound in bytes (0: not counted)."""
        return 0

    async def emit(self, event: ResponseEvent) -> None:
        channel = self._channel
        if not channel.has_room():
            await channel.wait_for_room()
        if channel.closed:
            raise ResponseStreamClosedError("the response is complete; nothing more can be sent")
        # No await from here to the put: ids leave in the order they are made.
        next_id = self._next_id or self._start_ids()
        event.id = next_id()
        try:
            item = self.encode(event)
        except (TypeError, ValueError) as exc:
            raise AgentError(f"event {event.event_name!r} cannot be sent as JSON: {exc}") from None
        self._counts[event.content_type] += 1
        channel.put_nowait(item, self.size(item), last=type(event) is DoneEvent)

    def _start_ids(self) -> MonotonicUlid:
        self._next_id = MonotonicUlid()
        return self._next_id

    def send_now(self, events: list[ResponseEvent]) -> None:
        """Send closing events at once, room or not: the run ends with the last of them."""
        if self._channel.closed or not events:
            return
        next_id = self._next_id or self._start_ids()
        for index, event in enumerate(events):
            event.id = next_id()
            self._counts[event.content_type] += 1
            item = self.encode(event)
            self._channel.put_nowait(item, self.size(item), last=index == len(events) - 1)


def _assist(
    agent: AbstractAgent, session: Session, query: Query, handler: ResponseHandler
) -> Coroutine[object, object, None]:
    """The agent's `assist()` coroutine, for a task of its own. An `assist()` that is not a
    coroutine function still runs, and fails, inside that task, as any agent's failure does."""
    try:
        coro = agent.assist(session, query, handler)
    except Exception as exc:
        return _raise(exc)
    return coro if asyncio.iscoroutine(coro) else _await(coro)


async def _raise(exc: Exception) -> None:
    raise exc


async def _await(awaitable: Awaitable[object]) -> None:
    await awaitable


async def _answered(
    resumption: Resumption,
    sealer: PauseSealer,
    agent: AbstractAgent,
    session: Session,
    query: Query,
    handler: ResponseHandler,
) -> None:
    """A run that answers a pause: the pause is claimed first (PauseRefused, 409, when it was
    answered already: then the agent never runs), and the agent goes on."""
    session.resumed = await claim(resumption, sealer)
    await _assist(agent, session, query, handler)


class Run(Generic[T]):
    """One agent run, started on creation; its `watcher` keeps its time limit.

    Read it, server and facade alike, with `take_ready()`, and `await ready()` when that
    gives None. Call `reader_left()` when done reading (or leaving early): the agent stops.
    """

    __slots__ = ("stats", "hook", "handler", "task", "cut_off", "_agent_name", "_channel", "_watcher", "_reader")

    def __init__(
        self,
        agent: AbstractAgent,
        session: Session,
        query: Query,
        *,
        watcher: RunWatcher,
        stats: RunStats,
        make_hook: Callable[[Channel[T], RunStats], ChannelHook[T]] = ChannelHook,
        sealer: PauseSealer | None = None,
        run_input: RunInput = NO_RUN_INPUT,
    ) -> None:
        self.stats = stats
        self._channel: Channel[T] = Channel(CHANNEL_CAPACITY, CHANNEL_MAX_BYTES)
        self.hook = make_hook(self._channel, stats)
        # The service's sealer; else the enclosing run's (a sub-agent run in-process); else this process's.
        sealer = sealer or current_sealer() or PROCESS_SEALER
        # A pause is bound to the agent run here, by the name the service knows it by: never the
        # session's processor_id, which the client writes; and to the caller and thread of its run.
        holder = pause_holder(run_input.caller, run_input.thread)
        self.handler = ResponseHandler(
            session.processor_id,
            self.hook,
            pauses=PauseContext(session, query.prompt, sealer, agent.name, holder),
            run_input=run_input,
        )
        self._agent_name = agent.name
        # A request that answers a pause resumes it, if its token holds for this agent and the
        # pause was not answered before; one that does not is refused (an error event, then done)
        # and the agent never runs. A face that checked the token already (to refuse with its own
        # 400 or 409) hands its resumption in the run's input, claimed.
        try:
            resumed = run_input.resumed
            if resumed is None:
                resumed = resumption_of(session, query.prompt, sealer, agent.name, holder=holder)
            # What the agent reads of the pause it resumes (`session.resumed`): set by the run alone, from its input.
            session.resumed = resumed
            if resumed is not None and not resumed.claimed:
                work = _answered(resumed, sealer, agent, session, query, self.handler)
            else:
                work = _assist(agent, session, query, self.handler)
        except PauseRefused as refused:
            work = _raise(refused)
        # Traced (the app's tracing is on): the agent's coroutine runs inside its invoke_agent
        # span, which starts and ends in the agent's task. Off: one context variable read a run.
        tracing = current_tracing()
        if tracing is not None:
            why_cancelled = partial(_why_cancelled, stats)
            work = tracing.run_agent(work, self._agent_name, stats.request_id, why_cancelled, query.prompt)
        # The task runs the agent's own coroutine, nothing around it: how it ended is read in
        # _after_agent. Named after the agent: one string for all its runs ("Task-N" is one each).
        # Its context knows the request id (current_request_id()), for what the agent reports.
        self.task = asyncio.create_task(
            work,
            name=self._agent_name,
            context=context_for_request(stats.request_id, self._agent_name, query.prompt, session, sealer),
        )
        self.task.add_done_callback(self._after_agent)
        self._watcher = watcher
        self._reader = asyncio.current_task()  # who creates a run reads it
        self.cut_off = False
        watcher.add(self)

    def time_out(self) -> None:
        """The time limit is up: the agent is cancelled and the run ends with `error` (504) and `done`."""
        if self.task.done() or self.stats.outcome is not RunOutcome.OPEN or self.stats.timed_out:
            return
        self.stats.timed_out = True
        self.task.cancel()

    def stop(self, error: ErrorContent | None = None, outcome: RunOutcome | None = None) -> None:
        """End the run now: cancel the agent and send the closing events (`error` if given, `done`)."""
        if outcome is not None and self.stats.outcome is RunOutcome.OPEN:
            self.stats.outcome = outcome
        if not self.task.done():
            self.task.cancel()
        self.hook.send_now(self.handler.close_now(error))

    def take_ready(self) -> list[T] | None:
        """What the run sent since the last call, all that was ready together; [] once it has
        ended and all is taken; None when there is nothing yet (await `ready()`)."""
        batch = self._channel.take_ready()
        if batch == [] and self.stats.outcome is RunOutcome.OPEN:
            self.stats.outcome = RunOutcome.COMPLETED
        return batch

    async def batches(self) -> AsyncIterator[list[T]]:
        """Each batch the run sends (all that was ready together) until its end, for a reader that
        keeps what it reads rather than writing it as it comes: a keepalive's wake-up is skipped."""
        while (batch := self.take_ready()) != []:
            if batch is None:
                await self.ready()
                continue
            yield batch

    def end_past_bound(self, what: str) -> None:
        """What its reader keeps of the answer is at its bound: the run ends now, once (the
        reader answers with an error saying so)."""
        if self.stats.outcome is RunOutcome.OPEN:
            logger.warning("%s too long: its run ended (request %s)", what, self.stats.request_id)
            self.stop(outcome=RunOutcome.COMPLETED)

    def ready(self) -> asyncio.Future[None]:
        """Done when there is something to take, or the run ended, or `wake_reader()` (a keepalive)."""
        self._watcher.silent(self)
        return self._channel.ready()

    def cut_off_reader(self) -> None:
        """The run has ended but its reader has not come back to take the end: it is stuck
        (writing to a client that does not read). Cancel it; `cut_off` tells it why."""
        if self._reader is not None and not self._reader.done():
            self.cut_off = True
            if self.stats.outcome is RunOutcome.OPEN:
                self.stats.outcome = RunOutcome.CUT_OFF
            self._reader.cancel()

    def wake_reader(self) -> None:
        self._channel.wake_reader()

    def client_left(self, listener: asyncio.Future[Received]) -> None:
        """The done callback of a task that waits for the client to leave: the run ends now."""
        if not listener.cancelled():
            self.stop(outcome=RunOutcome.DISCONNECTED)

    def reader_left(self) -> None:
        """The reader is gone, or `done` is out: the agent has nobody left to answer."""
        self._watcher.discard(self)
        if self.stats.outcome is RunOutcome.OPEN:
            self.stats.outcome = RunOutcome.DISCONNECTED
        if not self.task.done():
            self.task.cancel()

    def _after_agent(self, task: asyncio.Task[None]) -> None:
        """However the agent's task ended, the run ends with `done`, after an `error` when it
        failed, timed out or was refused a call. When the run was ended on purpose (the reader
        left, shutdown) nothing more is sent, and when `done` is already out, nothing either:
        then a failure is only logged."""
        stats = self.stats
        exc = None if task.cancelled() else task.exception()  # always read: asyncio logs one never read
        error: ErrorContent | None = None
        if task.cancelled():
            if stats.outcome is RunOutcome.OPEN:
                error = self._cancelled()
        elif exc is not None:
            error = self._failure(exc)
        if stats.outcome is not RunOutcome.OPEN or self._channel.closed:
            return
        try:
            # The error first, then the closing chunks of open streams, then `done`.
            self.hook.send_now(self.handler.close_now(error, error_at="start"))
        except Exception:
            # Even the closing events could not be made: end the stream without them rather than hang.
            logger.exception("could not send the closing events (request %s)", stats.request_id)
        self._channel.close()

    def _cancelled(self) -> ErrorContent | None:
        """The `error` for an agent task cancelled while its run was open: the time limit's doing,
        or else the agent raised CancelledError itself."""
        stats = self.stats
        if stats.timed_out:
            logger.warning("agent %s timed out (request %s)", self._agent_name, stats.request_id)
            return ErrorContent(error_message=TIMEOUT_MESSAGE, error_code=504, details={"request_id": stats.request_id})
        return self._failure(None)

    def _failure(self, exc: BaseException | None) -> ErrorContent | None:
        """The `error` that says why the agent failed (None: nothing the client needs); logged."""
        stats, name = self.stats, self._agent_name
        request_id = {"request_id": stats.request_id}
        if isinstance(exc, CallRefused):
            # The framework's own refusal of an agent-to-agent call: its message is safe and says why.
            logger.warning("agent %s: %s (request %s)", name, exc, stats.request_id)
            return ErrorContent(
                error_message=str(exc), error_code=exc.error_code, details={"refused": exc.reason, **request_id}
            )
        if isinstance(exc, PauseRefused):
            logger.warning("agent %s: resume refused: %s (request %s)", name, exc, stats.request_id)
            return ErrorContent(
                error_message=str(exc), error_code=exc.status, details={"refused": "resume", **request_id}
            )
        if isinstance(exc, ResponseStreamClosedError):
            # It emitted after complete(), or after its run was ended: the reader has `done` already.
            logger.warning("agent %s emitted after its response was complete (request %s)", name, stats.request_id)
            return None
        stats.agent_failed = True
        kind = type(exc).__name__ if exc is not None else "CancelledError"
        logger.error("agent %s raised %s (request %s)", name, kind, stats.request_id, exc_info=exc)
        return ErrorContent(
            error_message=AGENT_FAILED_MESSAGE, error_code=500, details={"error_type": kind, **request_id}
        )
