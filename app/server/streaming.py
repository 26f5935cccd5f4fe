"""The SSE bridge: runs one agent task and turns its events into frame bytes.

    agent.assist() -> ResponseHandler -> SseHook (id, one serialization) -> Channel
        -> sse_frames() -> EventSourceResponse -> socket

Whatever the agent does, the stream ends with exactly one `done`: the agent
raising, timing out, returning without `complete()`, or the server shutting
down all end in `done`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict
from typing import AsyncIterator

from app.protocol.events import DoneEvent, ErrorContent
from app.protocol.request import Query
from app.runtime.agent import AbstractAgent
from app.runtime.channel import Channel
from app.runtime.errors import AgentError, ResponseStreamClosedError
from app.runtime.ids import MonotonicUlid
from app.runtime.response_handler import ResponseHandler
from app.runtime.session import Session

logger = logging.getLogger("app.stream")

# Frames waiting to be written before a fast agent has to wait: backpressure.
CHANNEL_CAPACITY = 256

AGENT_FAILED_MESSAGE = "The agent failed while answering. The error has been logged."
TIMEOUT_MESSAGE = "The agent did not finish within the request time limit."
SHUTDOWN_MESSAGE = "The server is shutting down; please retry."


class StreamStats:
    """What happened on one stream, for its log line and the metrics: counts, never contents."""

    __slots__ = ("request_id", "events_by_type", "outcome", "agent_failed", "timed_out", "started")

    def __init__(self, request_id: str) -> None:
        self.request_id = request_id
        self.events_by_type: defaultdict[str, int] = defaultdict(int)
        self.outcome = "open"  # then: completed, disconnected, shutdown
        self.agent_failed = False
        self.timed_out = False
        self.started = time.monotonic()

    @property
    def events(self) -> int:
        return sum(self.events_by_type.values())


class SseHook:
    """Stamps each event with a monotonic ULID, writes its frame once, and queues the bytes."""

    __slots__ = ("_channel", "_next_id", "_counts")

    def __init__(self, channel: Channel[bytes], stats: StreamStats) -> None:
        self._channel = channel
        self._next_id = MonotonicUlid()
        self._counts = stats.events_by_type

    async def emit(self, event) -> None:
        channel = self._channel
        if not channel.has_room():
            await channel.wait_for_room()
        if channel.closed:
            raise ResponseStreamClosedError("the response is complete; nothing more can be sent")
        # No await from here to the put: ids leave in the order they are made.
        event.id = self._next_id()
        try:
            frame = event.sse_frame()
        except (TypeError, ValueError) as exc:
            raise AgentError(f"event {event.event_name!r} cannot be sent as JSON: {exc}") from None
        self._counts[event.content_type] += 1
        channel.put_nowait(frame, last=type(event) is DoneEvent)

    def send_now(self, events: list) -> None:
        """Send closing events at once, room or not: the stream ends with the last of them."""
        if self._channel.closed or not events:
            return
        frames = []
        for event in events:
            event.id = self._next_id()
            frames.append(event.sse_frame())
            self._counts[event.content_type] += 1
        self._channel.put_nowait(b"".join(frames), last=True)


async def run_agent(
    agent: AbstractAgent,
    session: Session,
    query: Query,
    handler: ResponseHandler,
    *,
    timeout: float,
    stats: StreamStats,
) -> None:
    """Run `assist()` under the time limit; an error becomes an `error` event; always `done` last."""
    try:
        async with asyncio.timeout(timeout) as deadline:
            await agent.assist(session, query, handler)
    except TimeoutError as exc:
        if not deadline.expired():
            await _report_failure(agent, handler, stats, exc)
        else:
            stats.timed_out = True
            logger.warning("agent %s timed out after %ss (request %s)", agent.name, timeout, stats.request_id)
            if not handler.is_complete:
                await handler.emit_error(TIMEOUT_MESSAGE, 504, {"request_id": stats.request_id})
    except ResponseStreamClosedError:
        # It emitted after complete(): the client already has `done`.
        logger.warning("agent %s emitted after its response was complete (request %s)", agent.name, stats.request_id)
    except Exception as exc:
        await _report_failure(agent, handler, stats, exc)
    await handler.complete()


async def _report_failure(agent: AbstractAgent, handler: ResponseHandler, stats: StreamStats, exc: BaseException) -> None:
    stats.agent_failed = True
    logger.error("agent %s raised %s (request %s)", agent.name, type(exc).__name__, stats.request_id, exc_info=exc)
    if not handler.is_complete:
        await handler.emit_error(
            AGENT_FAILED_MESSAGE, 500, {"error_type": type(exc).__name__, "request_id": stats.request_id}
        )


class ShutdownSignal:
    """Set by sse-starlette when the server begins to shut down.

    The stream may run on for `grace` seconds; then its agent is cancelled and
    the client gets `error` (503) and `done`. It stands in for the `anyio.Event`
    that EventSourceResponse sets, so that no task per stream waits on one.
    """

    __slots__ = ("_grace", "_handler", "_hook", "_task", "_stats", "_timer")

    def __init__(self, grace: float) -> None:
        self._grace = grace
        self._handler: ResponseHandler | None = None
        self._hook: SseHook | None = None
        self._task: asyncio.Task | None = None
        self._stats: StreamStats | None = None
        self._timer: asyncio.TimerHandle | None = None

    def bind(self, handler: ResponseHandler, hook: SseHook, task: asyncio.Task, stats: StreamStats) -> None:
        self._handler, self._hook, self._task, self._stats = handler, hook, task, stats

    def set(self) -> None:
        if self._grace > 0:
            self._timer = asyncio.get_running_loop().call_later(self._grace, self.end_stream)
        else:
            self.end_stream()

    def cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()

    def end_stream(self) -> None:
        if self._task is None or self._task.done():
            return
        self._task.cancel()
        assert self._handler is not None and self._hook is not None and self._stats is not None
        self._stats.outcome = "shutdown"
        error = ErrorContent(
            error_message=SHUTDOWN_MESSAGE, error_code=503, details={"request_id": self._stats.request_id}
        )
        self._hook.send_now(self._handler.close_now(error))


async def sse_frames(
    agent: AbstractAgent,
    session: Session,
    query: Query,
    *,
    timeout: float,
    stats: StreamStats,
    shutdown: ShutdownSignal | None = None,
) -> AsyncIterator[bytes]:
    """The bytes of the response: every frame that is ready goes out in one write."""
    channel: Channel[bytes] = Channel(CHANNEL_CAPACITY)
    hook = SseHook(channel, stats)
    handler = ResponseHandler(session.processor_id, hook)
    task = asyncio.create_task(
        run_agent(agent, session, query, handler, timeout=timeout, stats=stats),
        name=f"assist:{stats.request_id}",
    )
    task.add_done_callback(lambda t: _after_agent(t, handler, hook, stats))
    if shutdown is not None:
        shutdown.bind(handler, hook, task, stats)
    try:
        while True:
            frames = await channel.take_all()
            if not frames:
                if stats.outcome == "open":
                    stats.outcome = "completed"
                return
            yield frames[0] if len(frames) == 1 else b"".join(frames)
    finally:
        if stats.outcome == "open":
            stats.outcome = "disconnected"
        if shutdown is not None:
            shutdown.cancel_timer()
        # The client is gone, or `done` is out: the agent has nobody left to answer.
        if not task.done():
            task.cancel()


def _after_agent(task: asyncio.Task, handler: ResponseHandler, hook: SseHook, stats: StreamStats) -> None:
    """A safety net: an agent task that ended without `done` still ends its stream.

    It catches what run_agent cannot: an agent that raised CancelledError of its
    own accord, or a failure of ours. When we cancelled the task (the client left,
    the server is stopping, `done` was sent) there is nobody to tell, and this is a no-op.
    """
    if task.cancelled():
        error_type = "CancelledError"
    else:
        exc = task.exception()
        if exc is None:
            return
        logger.error("agent task failed outside the agent (request %s)", stats.request_id, exc_info=exc)
        error_type = type(exc).__name__
    if handler.is_complete or stats.outcome != "open":
        return
    stats.agent_failed = True
    details = {"error_type": error_type, "request_id": stats.request_id}
    hook.send_now(handler.close_now(ErrorContent(error_message=AGENT_FAILED_MESSAGE, error_code=500, details=details)))
