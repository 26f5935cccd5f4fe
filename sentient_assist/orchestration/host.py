"""HostAgent: a host model that answers, or hands the task to specialists.

Hand-off is tool calling: one tool per specialist, with a `reason` and an optional
rewritten `task`. What we fix of the usual host pattern:

- a direct answer streams, and text before a tool call does not hide the hand-off;
- a call naming no specialist goes to the fallback; without one, the host answers itself,
  or, when the model named specialists we have too, an error event says which name was
  unknown: never a crash, never silence;
- `HANDOFF` goes out, then the `on_handoff` callbacks (the host's, then the run's own:
  `handoff_callbacks()`) run, awaited, in order, each given the target and the model's raw
  argument as Eino's OnHandOff is, then the specialist runs, its events streaming through
  under its own source;
- several hand-offs in one turn run concurrently, and reach the client one after
  another in a fixed order (the first streams live, the next wait their turn);
- every tool call of the host model gets its tool message (what became of it);
- two specialists whose names would make the same tool name are refused at construction;
- everything is per request: nothing is kept on the agent between requests.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import re
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from sentient_assist.facade.agent import Agent
from sentient_assist.llm.agent import LLMAgent
from sentient_assist.llm.messages import (
    ChatMessage,
    ToolCallRequest,
    ToolSpec,
    assistant,
    chat_history,
    system,
    tool_result,
    user,
)
from sentient_assist.llm.model import ChatModel, ModelSettings
from sentient_assist.llm.reply import ONE_REQUEST, Reply, ReplyStreams, finish_run, stream_reply
from sentient_assist.llm.tools import arguments_object
from sentient_assist.orchestration.calls import CallPolicy, CallResult, agent_name, call_agent, calls_of_request
from sentient_assist.orchestration.forwarding import Forwarder
from sentient_assist.protocol import conventions as names
from sentient_assist.protocol.conventions import HandoffPayload, TokenUsage
from sentient_assist.protocol.history import Message, messages_from
from sentient_assist.protocol.request import Query
from sentient_assist.runtime.agent import AbstractAgent
from sentient_assist.runtime.errors import CallRefused, ModelProviderError, RemoteAgentError
from sentient_assist.runtime.response_handler import ResponseHandler
from sentient_assist.runtime.session import Session
from sentient_assist.tracing import current_tracing

logger = logging.getLogger("sentient_assist.orchestration")

DEFAULT_SYSTEM_PROMPT = (
    "You are a host. Answer directly when you can. When a specialist fits the request better, "
    "hand it over by calling that specialist's tool with your reason and, if useful, the task "
    "rewritten for the specialist."
)
SUMMARY_PROMPT = "Join the specialists' answers into one answer for the user. Keep what they found."
UNKNOWN_SPECIALIST_CODE = 404
_TOOL_NAME = re.compile(r"[^a-zA-Z0-9_-]")
_MAX_TOOL_NAME = 64


@dataclass(frozen=True)
class Specialist:
    """An agent the host can hand off to, and what it is for (the model reads `intended_use`).

    `agent` is any agent of this process, a remote one (`Agent("http://.../assist")`: another
    instance of this service, or anything that speaks /assist; its events stream through
    live, under their own source), or a chat model (it answers as an LLMAgent of its name).
    `name` is what the host's model calls it: by default the agent's own."""

    agent: AbstractAgent | Agent
    intended_use: str
    name: str = ""

    def __init__(self, agent: AbstractAgent | Agent | ChatModel, intended_use: str, *, name: str = "") -> None:
        if not isinstance(agent, (AbstractAgent, Agent)):
            if not callable(getattr(agent, "stream", None)) or not isinstance(getattr(agent, "name", None), str):
                raise TypeError(f"a Specialist is an agent, an Agent(url) or a chat model, got {type(agent).__name__}")
            agent = LLMAgent(model=agent, name=name or agent.name)
        object.__setattr__(self, "agent", agent)
        object.__setattr__(self, "intended_use", intended_use)
        object.__setattr__(self, "name", name or agent_name(agent))


@dataclass(frozen=True)
class Handoff:
    """One hand-off, as the `on_handoff` callbacks see it: as Eino's OnHandOff, the target's
    name and the model's raw argument (its JSON, as it came), and parsed from it the reason
    and the rewritten task."""

    to_agent: str
    reason: str
    task: str | None
    call_id: str
    argument: str = "{}"


HandoffCallback = Callable[[Handoff], Awaitable[None]]

_run_callbacks: contextvars.ContextVar[tuple[HandoffCallback, ...]] = contextvars.ContextVar(
    "handoff_callbacks", default=()
)


@contextmanager
def handoff_callbacks(*callbacks: HandoffCallback) -> Iterator[None]:
    """`on_handoff` callbacks for the runs started inside, after the host's own:

        with handoff_callbacks(record):
            result = await Agent(host).run("...")

    For runs in this process (a callback is code: it does not travel to a remote host)."""
    token = _run_callbacks.set(_run_callbacks.get() + callbacks)
    try:
        yield
    finally:
        _run_callbacks.reset(token)


@dataclass(frozen=True)
class HandoffLimits:
    """At most `max_handoffs` hand-offs per request; the rest are refused with an error event."""

    max_handoffs: int = 3


@dataclass
class _HostRun:
    """One request's state, made per request: nothing of it is kept on the agent."""

    prompt: str
    conversation: tuple[Message, ...]  # the session's history, as the specialists get it
    messages: list[ChatMessage]  # what the host model reads
    streams: ReplyStreams
    handler: ResponseHandler
    usage: TokenUsage = field(default_factory=TokenUsage)  # every model reply of the request, added up


@dataclass(frozen=True)
class _Decision:
    """What the host makes of one tool call of its model."""

    call: ToolCallRequest
    specialist: Specialist | None = None  # None: no specialist by that name, and no fallback
    handoff: Handoff | None = None  # None: not handed off (no specialist, or over the limit)


class HostAgent(AbstractAgent):
    def __init__(
        self,
        *,
        model: ChatModel,
        specialists: Sequence[Specialist],
        name: str = "host",
        description: str = "A host that answers, or hands the task to a specialist.",
        system_prompt: str = DEFAULT_SYSTEM_PROMPT,
        fallback: str | None = None,
        on_handoff: Sequence[HandoffCallback] = (),
        limits: HandoffLimits = HandoffLimits(),
        summarizer: ChatModel | None = None,
        policy: CallPolicy = CallPolicy(),
        model_settings: ModelSettings | None = None,
    ) -> None:
        super().__init__(name)
        self.description = description
        self.model = model
        self.specialists = _by_tool_name(specialists)
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

    async def aclose(self) -> None:
        """Close what its specialists of this process hold open (their MCP servers' sessions)."""
        agents = [s.agent for s in self.specialists.values() if isinstance(s.agent, AbstractAgent)]
        await asyncio.gather(*(agent.aclose() for agent in agents))

    async def assist(self, session: Session, query: Query, response_handler: ResponseHandler) -> None:
        with calls_of_request(self.name, self.policy):
            await self._assist(session, query, response_handler)

    async def _assist(self, session: Session, query: Query, response_handler: ResponseHandler) -> None:
        conversation = messages_from(session.get_interactions())
        run = _HostRun(
            prompt=query.prompt,
            conversation=conversation,
            messages=[system(self.system_prompt), *chat_history(conversation), user(query.prompt)],
            streams=ReplyStreams(response_handler),
            handler=response_handler,
        )
        failure: ModelProviderError | None = None
        try:
            reply = await self._reply(run, self.model, run.messages, self._tools())
            if reply.calls:
                run.messages.append(assistant(reply.text, tuple(reply.calls)))
                await self._hand_off(run, reply.calls)
        except ModelProviderError as exc:
            failure = exc
        await finish_run(response_handler, run.streams, run.usage, failure)

    async def _reply(
        self, run: _HostRun, model: ChatModel, messages: list[ChatMessage], tools: list[ToolSpec]
    ) -> Reply:
        """One host (or summarizer) reply, streamed as it comes; its reasoning is a stream of its own."""
        run.usage += ONE_REQUEST
        reply = await stream_reply(model, messages, tools, self.model_settings, run.streams)
        run.usage += reply.usage
        await run.streams.close(names.THINKING)
        return reply

    async def _hand_off(self, run: _HostRun, calls: list[ToolCallRequest]) -> None:
        """Act on the host model's tool calls: hand the request to the specialists they name or,
        when they name none we have, answer it itself."""
        decisions = self._decide(calls)
        handoffs = [(d.specialist, d.handoff) for d in decisions if d.specialist is not None and d.handoff is not None]
        went_to = ", ".join(handoff.to_agent for _, handoff in handoffs)
        run.messages.extend(self._tool_message(decision, went_to) for decision in decisions)
        await self._refuse_over_limit(run.handler, decisions)
        if not handoffs and any(d.specialist is None for d in decisions):
            await self._reply(run, self.model, run.messages, [])  # it named no specialist we have: the host answers
            return
        await self._report_unknown(run.handler, decisions, went_to)
        await self._announce(run.handler, [handoff for _, handoff in handoffs])
        if current_tracing() is not None:  # events on the host's invoke_agent span: to whom, never why
            from sentient_assist.runtime.tracing import add_event

            for _, handoff in handoffs:
                add_event("sentient.handoff", {"sentient.handoff.to_agent": handoff.to_agent})
        await run.streams.close(names.FINAL_RESPONSE, paragraph=True)  # the host's text ends before theirs
        results = await self._run_specialists(run, handoffs)
        if self.summarizer is not None and results:
            await self._summarize(run, self.summarizer, results)

    def _decide(self, calls: list[ToolCallRequest]) -> list[_Decision]:
        """Each call's fate, in order: a hand-off to the specialist it names (else to the fallback)
        while under the limit; past it, skipped; with no specialist to hand to, unknown."""
        decisions: list[_Decision] = []
        handed = 0
        for call in calls:
            specialist = self.specialists.get(call.name) or (
                self.specialists.get(self.fallback) if self.fallback else None
            )
            if specialist is not None and handed < self.limits.max_handoffs:
                handed += 1
                decisions.append(_Decision(call, specialist, _handoff(call, specialist)))
            else:
                decisions.append(_Decision(call, specialist))
        return decisions

    def _tool_message(self, decision: _Decision, went_to: str) -> ChatMessage:
        """What became of one call, as its tool message: the chat API wants one for every call."""
        call, specialist = decision.call, decision.specialist
        if specialist is not None and decision.handoff is not None:
            said = f"Handed to {specialist.name}."
        elif specialist is not None:
            said = f"Not handed to {specialist.name}: at most {self.limits.max_handoffs} hand-offs per request."
        elif went_to:
            said = f"There is no specialist named {call.name!r}; the request went to {went_to}."
        else:
            said = f"There is no specialist named {call.name!r}; answer the user yourself."
        return tool_result(call, said)

    async def _refuse_over_limit(self, handler: ResponseHandler, decisions: list[_Decision]) -> None:
        """An error event for each call skipped because the hand-off limit was reached."""
        for decision in decisions:
            if decision.specialist is not None and decision.handoff is None:
                await handler.emit_error(
                    f"Only {self.limits.max_handoffs} hand-offs per request; the one to {decision.specialist.name} "
                    "was skipped.",
                    429,
                    {"limit": "max_handoffs"},
                )

    async def _report_unknown(self, handler: ResponseHandler, decisions: list[_Decision], went_to: str) -> None:
        """Calls naming no specialist while others were handed the request: the user and the log hear of each."""
        for decision in decisions:
            if decision.specialist is None:
                unknown = decision.call.name[:_MAX_TOOL_NAME]
                logger.warning(
                    "host %s: its model asked for a specialist %r it does not have; the request went to %s",
                    self.name,
                    unknown,
                    went_to,
                )
                await handler.emit_error(
                    f"There is no specialist named {unknown!r}; the request went to {went_to}.",
                    UNKNOWN_SPECIALIST_CODE,
                    {"unknown_specialist": unknown},
                )

    async def _announce(self, handler: ResponseHandler, handoffs: list[Handoff]) -> None:
        """Each hand-off's HANDOFF event, then its on_handoff callbacks, awaited, in order."""
        for handoff in handoffs:
            argument = {"reason": handoff.reason, "task": handoff.task}
            await handler.emit_json(names.HANDOFF, HandoffPayload(to_agent=handoff.to_agent, argument=argument))
            for callback in (*self.on_handoff, *_run_callbacks.get()):
                try:
                    await callback(handoff)
                except Exception:  # an observer's failure must not cost the user the answer
                    logger.exception("on_handoff callback %r failed (hand-off to %s)", callback, handoff.to_agent)

    async def _run_specialists(self, run: _HostRun, handoffs: list[tuple[Specialist, Handoff]]) -> list[CallResult]:
        """Concurrently; the client hears them in order: the first live, each next one released
        when the one before it ends. With a summarizer, they run unheard and it speaks for them.
        Several heard each get a paragraph of the answer, opened with their name."""
        heard = self.summarizer is None
        attributed = heard and len(handoffs) > 1
        if attributed:  # the host's own text, if any, ended with a paragraph already
            await run.streams.write(names.FINAL_RESPONSE, f"{handoffs[0][0].name}: ")
        forwarders = [
            Forwarder(run.handler) if heard and index == 0 else Forwarder.held(run.handler)
            for index in range(len(handoffs))
        ]
        tasks = [
            asyncio.create_task(self._call_specialist(run, specialist, handoff, forward if heard else None))
            for (specialist, handoff), forward in zip(handoffs, forwarders, strict=False)
        ]
        results: list[CallResult] = []
        try:
            for index, (task, (specialist, _)) in enumerate(zip(tasks, handoffs, strict=False)):
                try:
                    results.append(await task)
                except CallRefused as refused:
                    await run.handler.emit_error(str(refused), refused.error_code, {"refused": refused.reason})
                except RemoteAgentError as exc:
                    await run.handler.emit_error(
                        f"The specialist {specialist.name} could not be reached.",
                        502,
                        {"specialist": specialist.name, "status": exc.status_code},
                    )
                if heard and index + 1 < len(forwarders):
                    if attributed:  # after the answer before it, a paragraph of its own
                        await run.streams.write(names.FINAL_RESPONSE, f"\n\n{handoffs[index + 1][0].name}: ")
                    await forwarders[index + 1].release()
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)  # each has stopped before the host goes on
        return results

    async def _call_specialist(
        self, run: _HostRun, specialist: Specialist, handoff: Handoff, forward: Forwarder | None
    ) -> CallResult:
        """The specialist on the user's prompt, or on the task the host rewrote for it (the
        prompt then joins its history)."""
        history, prompt = run.conversation, run.prompt
        if handoff.task:
            history, prompt = (*run.conversation, Message(role="user", content=run.prompt)), handoff.task
        return await call_agent(
            specialist.agent, prompt, history=history, forward=forward, caller=self.name, policy=self.policy
        )

    async def _summarize(self, run: _HostRun, summarizer: ChatModel, results: list[CallResult]) -> None:
        """The summarizer joins the specialists' answers into one, streamed as the host's."""
        request = [
            system(SUMMARY_PROMPT),
            user(run.prompt),
            *[user(f"{r.agent_name} answered:\n{r.result.text}") for r in results],
        ]
        await self._reply(run, summarizer, request, [])
        await run.streams.close(names.FINAL_RESPONSE)


def _handoff(call: ToolCallRequest, specialist: Specialist) -> Handoff:
    arguments = arguments_object(call.arguments)
    task = arguments.get("task")
    return Handoff(
        specialist.name, str(arguments.get("reason") or ""), str(task) if task else None, call.id, call.arguments
    )


def _tool_name(name: str) -> str:
    return _TOOL_NAME.sub("_", name)[:_MAX_TOOL_NAME]


def _by_tool_name(specialists: Sequence[Specialist]) -> dict[str, Specialist]:
    """The specialists by their tool's name; two that would share one are refused (one would hide the other)."""
    found: dict[str, Specialist] = {}
    for specialist in specialists:
        tool = _tool_name(specialist.name)
        if tool in found:
            raise ValueError(
                f"specialists {found[tool].name!r} and {specialist.name!r} would share the tool name {tool!r} "
                f"(a tool name keeps letters, digits, '_' and '-', at most {_MAX_TOOL_NAME} of them): rename one"
            )
        found[tool] = specialist
    return found
