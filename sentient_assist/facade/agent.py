"""Agent: run an agent and read typed events and results, in-process or over HTTP, one pipeline.

agent = Agent(MyAgent())                                   # in this process
agent = Agent("http://127.0.0.1:8000/assist", api_key=...) # on a running service
result = await agent.run("hi")                             # AgentResult
async with agent.stream("hi") as events:                   # AgentEvents as they come
    async for event in events: ...
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable
from contextlib import aclosing
from typing import Any, Generic, TypeVar, overload
from urllib.parse import urlsplit

from ulid import ULID

from sentient_assist.facade.events import AgentEvent
from sentient_assist.facade.reader import EventReader, ResultBuilder
from sentient_assist.facade.result import AgentResult
from sentient_assist.facade.transport import InProcessTransport, Transport, without_credentials
from sentient_assist.llm.output import OutputSpec
from sentient_assist.protocol.events import DoneEvent
from sentient_assist.protocol.history import Message, as_messages, interactions_from
from sentient_assist.protocol.request import Query, SessionObject
from sentient_assist.runtime.agent import AbstractAgent

T = TypeVar("T")
OutputT = TypeVar("OutputT")

DEFAULT_TIMEOUT = 300.0
_END = object()
_CANCELLED = object()


class Agent:
    """A handle on one agent: `run()` for a result, `stream()` for events, `run_sync()` for scripts."""

    def __init__(
        self,
        agent: AbstractAgent | str,
        *,
        api_key: str | None = None,
        processor_id: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        self._transport: Transport
        self.output_type: type[Any] | None = None  # run()'s output type when it is given none
        if isinstance(agent, AbstractAgent):
            self._transport = InProcessTransport(agent, timeout)
            self.processor_id = processor_id or agent.name
            spec = getattr(agent, "output", None)  # an LLMAgent(output_type=...): its results are of that type
            if isinstance(spec, OutputSpec):
                self.output_type = spec.output_type
        elif isinstance(agent, str) and agent.startswith(("http://", "https://")):
            from sentient_assist.facade.http_transport import HttpTransport  # httpx, only for a URL

            self._transport = HttpTransport(agent, api_key, timeout)
            self.processor_id = processor_id or urlsplit(without_credentials(agent)).netloc
        else:
            raise TypeError(f"Agent() takes an AbstractAgent or an http(s) URL of /assist, got {agent!r}")

    @overload
    def stream(
        self,
        prompt: str,
        *,
        history: Iterable[Message | dict[str, Any]] = (),
        forward: Callable[[Any], Awaitable[None]] | None = None,
        output_type: None = None,
    ) -> AgentStream[Any]: ...

    @overload
    def stream(
        self,
        prompt: str,
        *,
        history: Iterable[Message | dict[str, Any]] = (),
        forward: Callable[[Any], Awaitable[None]] | None = None,
        output_type: type[T],
    ) -> AgentStream[T]: ...

    def stream(
        self,
        prompt: str,
        *,
        history: Iterable[Message | dict[str, Any]] = (),
        forward: Callable[[Any], Awaitable[None]] | None = None,
        output_type: type[Any] | None = None,
    ) -> AgentStream[Any]:
        """The run's events as they happen; `cancel()` stops it, and `result()` sums it up:
        the result `run()` returns for the same arguments, its output typed the same way.

        `forward`, if given, is awaited with each wire event but `done`, in order, before it
        is read: orchestration uses it to stream a sub-agent's events through to its client.
        """
        messages = as_messages(history)
        chat_id = ULID()
        session = SessionObject(
            processor_id=self.processor_id,
            activity_id=chat_id,
            request_id=ULID(),
            interactions=interactions_from(messages, chat_id, self.processor_id),
        )
        query = Query(id=ULID(), prompt=prompt)
        builder = ResultBuilder(prompt, messages, output_type if output_type is not None else self.output_type)
        return AgentStream(self._transport.events(query, session), builder, forward)

    @overload
    async def run(
        self, prompt: str, *, history: Iterable[Message | dict[str, Any]] = (), output_type: None = None
    ) -> AgentResult[Any]: ...

    @overload
    async def run(
        self, prompt: str, *, history: Iterable[Message | dict[str, Any]] = (), output_type: type[T]
    ) -> AgentResult[T]: ...

    async def run(
        self, prompt: str, *, history: Iterable[Message | dict[str, Any]] = (), output_type: type[Any] | None = None
    ) -> AgentResult[Any]:
        """Run one turn to its end and return what it produced; with `output_type`, its
        `output` validated as one (an agent that sends none leaves it None). Without, the
        output type is the agent's (`self.output_type`: an in-process LLMAgent's), if any;
        else `output` is the JSON as it came. The same as `stream()`'s `result()`."""
        async with self.stream(prompt, history=history, output_type=output_type) as events:
            async for _ in events:
                pass
        return events.result()

    async def resume(self, paused: AgentResult[Any], answer: str) -> AgentResult[Any]:
        """Answer the question a run stopped at (`paused.interrupt`), and let it go on: the
        answer is the next turn's prompt, `paused.messages` its history, as Sentient Chat
        sends them; the agent finds the pause again in that history, its token checked. A pause
        is answered once: resuming it again gives a result whose error (409) says it was
        answered already, and the agent does not run again."""
        interrupt = paused.interrupt
        if interrupt is None or not interrupt.resumable:
            raise ValueError("this run did not stop at a pause it can resume (its interrupt is not resumable)")
        return await self.run(answer, history=paused.messages)

    def run_sync(
        self, prompt: str, *, history: Iterable[Message | dict[str, Any]] = (), output_type: type[T] | None = None
    ) -> AgentResult[Any]:
        """`run()` for code that has no event loop of its own."""
        return asyncio.run(self.run(prompt, history=history, output_type=output_type))


class AgentStream(Generic[OutputT]):
    """An async iterator of AgentEvents.

    The run proceeds in a task of its own, so `cancel()`, called from anywhere,
    stops the agent (in-process: its task; remote: the connection) and the
    iteration ends with a `cancelled` event. Leaving early (`break` inside
    `async with`, `aclose()`, or the reading task being cancelled) stops the
    agent too.
    """

    def __init__(
        self,
        wire_events: AsyncGenerator[Any, None],
        builder: ResultBuilder,
        forward: Callable[[Any], Awaitable[None]] | None = None,
    ) -> None:
        self._wire_events = wire_events
        self._forward = forward
        self._builder = builder
        self._reader = EventReader()
        self._queue: asyncio.Queue[Any] = asyncio.Queue(maxsize=256)
        self._pump: asyncio.Task[None] | None = None
        self._finished = False
        self._cancel_requested = False

    def __aiter__(self) -> AgentStream[OutputT]:
        return self

    async def __aenter__(self) -> AgentStream[OutputT]:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def __anext__(self) -> AgentEvent:
        while True:
            if self._finished:
                raise StopAsyncIteration
            if self._cancel_requested:
                return self._end_cancelled()
            if self._pump is None:
                self._pump = asyncio.create_task(self._pump_events())
            try:
                item = await self._queue.get()
            except asyncio.CancelledError:
                self._pump.cancel()
                raise
            if item is _END:
                self._finished = True
                raise StopAsyncIteration
            if item is _CANCELLED:
                continue
            if isinstance(item, BaseException):
                self._finished = True
                raise item
            self._builder.add_wire(item)
            if self._forward is not None and not isinstance(item, DoneEvent):
                await self._forward(item)
            event = self._reader.read(item)
            if event is not None:
                self._builder.add(event)
                if event.kind == "done":
                    self._finished = True
                    event = event.model_copy(update={"result": self._builder.result()})
                return event

    async def _pump_events(self) -> None:
        try:
            async with aclosing(self._wire_events) as events:
                async for event in events:
                    await self._queue.put(event)
            await self._queue.put(_END)
        except Exception as exc:
            await self._queue.put(exc)

    def cancel(self) -> None:
        """Stop the run: the agent stops, and the iteration ends with a `cancelled` event."""
        if self._finished or self._cancel_requested:
            return
        self._cancel_requested = True
        if self._pump is not None:
            self._pump.cancel()
        try:
            self._queue.put_nowait(_CANCELLED)  # wakes a reader waiting for the next event
        except asyncio.QueueFull:
            pass  # a full queue has no reader waiting

    def _end_cancelled(self) -> AgentEvent:
        self._finished = True
        event = self._reader.cancelled()
        self._builder.add(event)
        return event

    async def aclose(self) -> None:
        """Stop the run if it is still going, and wait until the agent has been told."""
        self._finished = True
        if self._pump is None:
            await self._wire_events.aclose()
        elif not self._pump.done():
            self._pump.cancel()
            await asyncio.gather(self._pump, return_exceptions=True)

    def result(self) -> AgentResult[OutputT]:
        """What the run produced so far: all of it once the iteration has ended."""
        return self._builder.result()
