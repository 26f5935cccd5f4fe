"""HostAgent: a host model that answers, or hands the task to specialists.

Hand-off is tool calling: one tool per specialist, with a `reason` and an optional
rewritten `task`. What we fix of the usual host pattern:

- a direct answer streams, and text before a tool call does not hide the hand-off;
- an unknown specialist goes to the fallback, or the host answers itself: never a crash;
- `HANDOFF` goes out, then the `on_handoff` callbacks run, awaited, in order, then the
  specialist runs, its events streaming through under its own source;
- several hand-offs in one turn run concurrently, and reach the client one after
  another in a fixed order (the first streams live, the next wait their turn);
- everything is per request: nothing is kept on the agent between requests.
"""

from __future__ import annotations

import asyncio
import logging
import re
from dataclasses import dataclass
from typing import Awaitable, Callable, Optional, Sequence

from app.facade.history import messages_from
from app.facade.result import Message
from app.llm.messages import (
    ChatMessage,
    ToolCallRequest,
    ToolSpec,
    UsageTally,
    assistant,
    system,
    tool_result,
    user,
)
from app.llm.history import chat_history
from app.llm.model import ChatModel, ModelSettings
from app.llm.reply import Reply, ReplyStreams, stream_reply
from app.llm.tools import arguments_object
from app.orchestration.calls import CallPolicy, CallResult, call_agent, calls_of_request
from app.orchestration.forwarding import Forwarder
from app.protocol import conventions as names
from app.protocol.request import Query
from app.runtime.agent import AbstractAgent
from app.runtime.errors import CallRefused, ModelProviderError, RemoteAgentError
from app.runtime.response_handler import ResponseHandler
from app.runtime.session import Session

logger = logging.getLogger("app.orchestration")

DEFAULT_SYSTEM_PROMPT = (
    "You are a host. Answer directly when you can. When a specialist fits the request better, "
    "hand it over by calling that specialist's tool with your reason and, if useful, the task "
    "rewritten for the specialist."
)
_TOOL_NAME = re.compile(r"[^a-zA-Z0-9_-]")


@dataclass(frozen=True)
class Specialist:
    """An agent the host can hand off to, and what it is for (the model reads `intended_use`)."""

    agent: AbstractAgent
    intended_use: str

    @property
    def name(self) -> str:
        return self.agent.name


@dataclass(frozen=True)
class Handoff:
    """One hand-off, as the `on_handoff` callbacks see it."""

    to_agent: str
    reason: str
    task: Optional[str]
    call_id: str


HandoffCallback = Callable[[Handoff], Awaitable[None]]


@dataclass(frozen=True)
class HandoffLimits:
    """At most `max_handoffs` hand-offs per request; the rest are refused with an error event."""

    max_handoffs: int = 3


class HostAgent(AbstractAgent):
    def __init__(
        self,
        *,
        model: ChatModel,
        specialists: Sequence[Specialist],
        name: str = "host",
        description: str = "A host that answers, or hands the task to a specialist.",
        system_prompt: str = DEFAULT_SYSTEM_PROMPT,
        fallback: Optional[str] = None,
        on_handoff: Sequence[HandoffCallback] = (),
        limits: HandoffLimits = HandoffLimits(),
        summarizer: Optional[ChatModel] = None,
        policy: CallPolicy = CallPolicy(),
        model_settings: Optional[ModelSettings] = None,
    ) -> None:
        super().__init__(name)
        self.description = description
        self.model = model
        self.specialists = {_tool_name(s.name): s for s in specialists}
        if fallback is not None and _tool_name(fallback) not in self.specialists:
            raise ValueError(f"fallback {fallback!r} is not one of the specialists: {', '.join(self.specialists)}")
        self.fallback = _tool_name(fallback) if fallback is not None else None
        self.system_prompt = system_prompt
        self.on_handoff = tuple(on_handoff)
        self.limits = limits
        self.summarizer = summarizer
        self.policy = policy
        self.model_settings = model_settings or ModelSettings()

    def _tools(self) -> list[ToolSpec]:
        parameters = {
            "type": "object",
            "properties": {
                "reason": {"type": "string", "description": "Why this specialist fits the request."},
                "task": {"type": "string", "description": "The task rewritten for the specialist (optional)."},
            },
            "required": ["reason"],
        }
        return [
            ToolSpec(name=tool, description=f"Hand the request to {s.name}: {s.intended_use}", parameters=parameters)
            for tool, s in self.specialists.items()
        ]

    async def assist(self, session: Session, query: Query, response_handler: ResponseHandler) -> None:
        with calls_of_request(self.name, self.policy):
            await self._assist(session, query, response_handler)

    async def _assist(self, session: Session, query: Query, response_handler: ResponseHandler) -> None:
        interactions = list(session.get_interactions())
        conversation = messages_from(interactions)
        messages = [system(self.system_prompt)] + chat_history(interactions) + [user(query.prompt)]
        usage = UsageTally()
        streams = ReplyStreams(response_handler)
        try:
            reply = await self._host_reply(self.model, messages, self._tools(), streams, usage)
            if reply.calls:
                messages.append(assistant(reply.text, tuple(reply.calls)))
                await self._hand_off(reply.calls, query.prompt, conversation, messages, streams, response_handler, usage)
        except ModelProviderError as failure:
            await streams.close(names.FINAL_RESPONSE)
            await response_handler.emit_error(failure.message, failure.error_code, failure.details or None)
        await streams.close(names.FINAL_RESPONSE)
        await response_handler.emit_json(names.USAGE, usage.payload())
        await response_handler.complete()

    async def _host_reply(
        self,
        model: ChatModel,
        messages: list[ChatMessage],
        tools: list[ToolSpec],
        streams: ReplyStreams,
        usage: UsageTally,
    ) -> Reply:
        """One host (or summarizer) reply, streamed as it comes; its reasoning is a stream of its own."""
        reply = await stream_reply(model, messages, tools, self.model_settings, streams, usage)
        await streams.close(names.THINKING)
        return reply

    async def _hand_off(
        self,
        calls: list[ToolCallRequest],
        prompt: str,
        conversation: tuple[Message, ...],
        messages: list[ChatMessage],
        streams: ReplyStreams,
        handler: ResponseHandler,
        usage: UsageTally,
    ) -> None:
        chosen: list[tuple[ToolCallRequest, Specialist, Handoff]] = []
        unknown: list[ToolCallRequest] = []
        for call in calls:
            specialist = self.specialists.get(call.name) or (self.specialists.get(self.fallback) if self.fallback else None)
            if specialist is None:
                unknown.append(call)
            elif len(chosen) >= self.limits.max_handoffs:
                await handler.emit_error(
                    f"Only {self.limits.max_handoffs} hand-offs per request; the one to {specialist.name} was skipped.",
                    429,
                    {"limit": "max_handoffs"},
                )
            else:
                arguments = arguments_object(call.arguments)
                task = arguments.get("task")
                handoff = Handoff(specialist.name, str(arguments.get("reason") or ""), str(task) if task else None, call.id)
                chosen.append((call, specialist, handoff))

        if unknown and not chosen:
            # The model named no specialist we have: the host answers itself.
            for call in unknown:
                messages.append(tool_result(call, f"There is no specialist named {call.name!r}; answer the user yourself."))
            await self._host_reply(self.model, messages, [], streams, usage)
            return

        for _, _, handoff in chosen:
            await handler.emit_json(
                names.HANDOFF, {"to_agent": handoff.to_agent, "argument": {"reason": handoff.reason, "task": handoff.task}}
            )
            for callback in self.on_handoff:
                try:
                    await callback(handoff)
                except Exception:  # an observer's failure must not cost the user the answer
                    logger.exception("on_handoff callback %r failed (hand-off to %s)", callback, handoff.to_agent)
        await streams.close(names.FINAL_RESPONSE, paragraph=True)  # the host's text ends before the specialists speak

        results = await self._run_specialists(chosen, prompt, conversation, handler)
        if self.summarizer is not None and results:
            summary_request = [
                system("Join the specialists' answers into one answer for the user. Keep what they found."),
                user(prompt),
                *[user(f"{r.agent_name} answered:\n{r.result.text}") for r in results],
            ]
            await self._host_reply(self.summarizer, summary_request, [], streams, usage)
            await streams.close(names.FINAL_RESPONSE)

    async def _run_specialists(
        self,
        chosen: list[tuple[ToolCallRequest, Specialist, Handoff]],
        prompt: str,
        conversation: tuple[Message, ...],
        handler: ResponseHandler,
    ) -> list[CallResult]:
        """Concurrently; the client hears them in order: the first live, each next one released
        when the one before it ends. With a summarizer, they run unheard and it speaks for them."""
        heard = self.summarizer is None
        forwarders = [Forwarder(handler, live=heard and index == 0) for index in range(len(chosen))]
        tasks = []
        for (_, specialist, handoff), forward in zip(chosen, forwarders):
            history, task_prompt = conversation, prompt
            if handoff.task:
                history, task_prompt = conversation + (Message(role="user", content=prompt),), handoff.task
            tasks.append(
                asyncio.create_task(
                    call_agent(
                        specialist.agent, task_prompt, history=history, forward=forward if heard else None,
                        caller=self.name, policy=self.policy,
                    )
                )
            )
        results: list[CallResult] = []
        try:
            for index, (task, (_, specialist, _)) in enumerate(zip(tasks, chosen)):
                try:
                    results.append(await task)
                except CallRefused as refused:
                    await handler.emit_error(str(refused), refused.error_code, {"refused": refused.reason})
                except RemoteAgentError as exc:
                    await handler.emit_error(f"The specialist {specialist.name} could not be reached.", 502,
                                             {"specialist": specialist.name, "status": exc.status_code})
                if heard and index + 1 < len(forwarders):
                    await forwarders[index + 1].release()
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)  # each has stopped before the host goes on
        return results


def _tool_name(name: str) -> str:
    return _TOOL_NAME.sub("_", name)[:64]
