"""The SSE bridge: runs one agent task and turns its events into frame bytes.

    agent.assist() -> ResponseHandler -> SseHook (id, one serialization) -> Channel
        -> sse_frames() -> EventSourceResponse -> socket

Whatever the agent does, the stream ends with exactly one `done`: the agent
raising, timing out or returning without `complete()` all end in `done`.
"""

from __future__ import annotations

import asyncio
import logging
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


class SseHook:
    """Stamps each event with a monotonic ULID, writes its frame once, and queues the bytes."""

    __slots__ = ("_channel", "_next_id", "_source", "events")

    def __init__(self, channel: Channel[bytes], source: str) -> None:
        self._channel = channel
        self._next_id = MonotonicUlid()
        self._source = source
        self.events = 0

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
        self.events += 1
        channel.put_nowait(frame, last=type(event) is DoneEvent)

    def send_now(self, events: list) -> None:
        """Send closing events at once, room or not: the stream ends with the last of them."""
        if self._channel.closed or not events:
            return
        frames = []
        for event in events:
            event.id = self._next_id()
            frames.append(event.sse_frame())
        self.events += len(frames)
        self._channel.put_nowait(b"".join(frames), last=True)


async def run_agent(
    agent: AbstractAgent,
    session: Session,
    query: Query,
    handler: ResponseHandler,
    *,
    timeout: float,
    request_id: str,
) -> None:
    """Run `assist()` under the time limit; an error becomes an `error` event; always `done` last."""
    try:
        async with asyncio.timeout(timeout) as deadline:
            await agent.assist(session, query, handler)
    except TimeoutError as exc:
        if not deadline.expired():
            await _report_failure(agent, handler, request_id, exc)
        else:
            logger.warning("agent %s timed out after %ss (request %s)", agent.name, timeout, request_id)
            if not handler.is_complete:
                await handler.emit_error(TIMEOUT_MESSAGE, 504, {"request_id": request_id})
    except ResponseStreamClosedError:
        # It emitted after complete(): the client already has `done`.
        logger.warning("agent %s emitted after its response was complete (request %s)", agent.name, request_id)
    except Exception as exc:
        await _report_failure(agent, handler, request_id, exc)
    await handler.complete()


async def _report_failure(agent: AbstractAgent, handler: ResponseHandler, request_id: str, exc: BaseException) -> None:
    logger.error("agent %s raised %s (request %s)", agent.name, type(exc).__name__, request_id, exc_info=exc)
    if not handler.is_complete:
        await handler.emit_error(
            AGENT_FAILED_MESSAGE, 500, {"error_type": type(exc).__name__, "request_id": request_id}
        )


class ShutdownSignal:
    """Set by sse-starlette when the server shuts down: the stream ends with `error` (503) and `done`.

    It stands in for the `anyio.Event` that EventSourceResponse sets, so that no
    task per stream has to wait on one.
    """

    __slots__ = ("_handler", "_hook", "_task", "_request_id")

    def __init__(self, request_id: str) -> None:
        self._request_id = request_id
        self._handler: ResponseHandler | None = None
        self._hook: SseHook | None = None
        self._task: asyncio.Task | None = None

    def bind(self, handler: ResponseHandler, hook: SseHook, task: asyncio.Task) -> None:
        self._handler, self._hook, self._task = handler, hook, task

    def set(self) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()
        if self._handler is not None and self._hook is not None:
            error = ErrorContent(error_message=SHUTDOWN_MESSAGE, error_code=503, details={"request_id": self._request_id})
            self._hook.send_now(self._handler.close_now(error))


async def sse_frames(
    agent: AbstractAgent,
    session: Session,
    query: Query,
    *,
    timeout: float,
    request_id: str,
    shutdown: ShutdownSignal | None = None,
) -> AsyncIterator[bytes]:
    """The bytes of the response: every frame that is ready goes out in one write."""
    channel: Channel[bytes] = Channel(CHANNEL_CAPACITY)
    hook = SseHook(channel, session.processor_id)
    handler = ResponseHandler(session.processor_id, hook)
    task = asyncio.create_task(
        run_agent(agent, session, query, handler, timeout=timeout, request_id=request_id),
        name=f"assist:{request_id}",
    )
    task.add_done_callback(lambda t: _after_agent(t, handler, hook, request_id))
    if shutdown is not None:
        shutdown.bind(handler, hook, task)
    try:
        while True:
            frames = await channel.take_all()
            if not frames:
                return
            yield frames[0] if len(frames) == 1 else b"".join(frames)
    finally:
        # The client is gone, or `done` is out: the agent has nobody left to answer.
        if not task.done():
            task.cancel()


def _after_agent(task: asyncio.Task, handler: ResponseHandler, hook: SseHook, request_id: str) -> None:
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
        logger.error("agent task failed outside the agent (request %s)", request_id, exc_info=exc)
        error_type = type(exc).__name__
    details = {"error_type": error_type, "request_id": request_id}
    hook.send_now(handler.close_now(ErrorContent(error_message=AGENT_FAILED_MESSAGE, error_code=500, details=details)))
