"""Agents calling agents: through the facade, guarded, with a context per call.

Every call made while a request runs shares one record of that request's calls
(a context variable, so it follows the request's tasks and never sits on an agent):

- depth: at most `max_depth` nested calls (default 5);
- loops: a call to an agent already in the current chain (A -> B -> A), or the
  same call (same chain, same agent, same prompt) made twice in the run, is refused;
- allow and block lists of agent names.

A refusal raises CallRefused; orchestrators turn it into a clear error event.
"""

from __future__ import annotations

import asyncio
import contextvars
import hashlib
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from sentient_assist.facade.agent import Agent
from sentient_assist.facade.result import AgentResult
from sentient_assist.orchestration.context import CallContext, DataSlush, build_context
from sentient_assist.orchestration.forwarding import Forwarder
from sentient_assist.protocol.history import Message, messages_from
from sentient_assist.runtime.agent import AbstractAgent
from sentient_assist.runtime.errors import CallRefused
from sentient_assist.runtime.request_context import current_agent, current_question

DEFAULT_MAX_DEPTH = 5


@dataclass(frozen=True)
class CallPolicy:
    """Limits on agent-to-agent calls for a whole request."""

    max_depth: int = DEFAULT_MAX_DEPTH
    allow: frozenset[str] | None = None  # None: every agent
    block: frozenset[str] = frozenset()
    time_zone: str = "UTC"  # of the temporal signals


@dataclass
class _RequestCalls:
    """Shared by every call of one request."""

    policy: CallPolicy
    seen: set[str] = field(default_factory=set)


@dataclass
class _Frame:
    """The call being run now: where it sits in the chain, what it was told, what it leaves."""

    chain: tuple[str, ...]
    depth: int  # nested calls from the top of the request: 1 for its first call
    calls: _RequestCalls
    context: CallContext | None = None
    slush_out: DataSlush | None = None


_current: contextvars.ContextVar[_Frame | None] = contextvars.ContextVar("assist_call_frame", default=None)
_served: contextvars.ContextVar[CallContext | None] = contextvars.ContextVar("assist_served_context", default=None)


@dataclass(frozen=True)
class CallResult:
    """One finished call: whose, what it produced, and the slush it left for the next agent."""

    agent_name: str
    result: AgentResult[Any]
    slush: DataSlush | None


@contextmanager
def calls_of_request(caller: str | None = None, policy: CallPolicy | None = None) -> Iterator[None]:
    """Make the calls inside share one record (depth, loops, policy) when no call is running yet.

    For an orchestrator at the top of a request: calls it starts concurrently (tasks copy
    the context when they are made) then count as one request's calls.
    """
    if _current.get() is not None:
        yield
        return
    root = _Frame(chain=_top(caller), depth=0, calls=_RequestCalls(policy or CallPolicy()))
    token = _current.set(root)
    try:
        yield
    finally:
        _current.reset(token)


def agent_name(agent: AbstractAgent | Agent) -> str:
    """The name a call to `agent` goes by: the one the guards check and its events carry."""
    return agent.name if isinstance(agent, AbstractAgent) else agent.processor_id


def current_context() -> CallContext | None:
    """The context of the call running now: an orchestrated call's, or, for the agent that
    serves the request, one built (once, when first read) from its prompt and history.
    None outside any run."""
    frame = _current.get()
    if frame is not None:
        return frame.context
    served = _served.get()
    if served is None:
        question = current_question()
        if question is None:
            return None
        prompt, session = question
        served = build_context(prompt, messages_from(session.get_interactions(), keep_events=False))
        _served.set(served)
    return served


def in_a_call() -> bool:
    """Whether the code runs inside an agent run by call_agent() (where publish_slush() works)."""
    frame = _current.get()
    return frame is not None and frame.depth > 0


def publish_slush(signals: dict[str, Any], confidence: float = 0.5) -> DataSlush:
    """Leave curated signals for the next agent in the chain; returns the slush made."""
    frame = _current.get()
    if frame is None or frame.depth == 0:
        raise RuntimeError("publish_slush() is for an agent run by call_agent(); there is no call here")
    slush = DataSlush(source_agent=frame.chain[-1], signals=signals, confidence=confidence)
    frame.slush_out = slush
    return slush


def check_call(callee: str, prompt: str, *, caller: str | None = None, policy: CallPolicy | None = None) -> None:
    """Raise CallRefused if calling `callee` now would be too deep, a loop, or not allowed."""
    chain, depth, calls = _where(caller, policy)
    _refusal(callee, prompt, chain, depth + 1, calls)


def _where(caller: str | None, policy: CallPolicy | None) -> tuple[tuple[str, ...], int, _RequestCalls]:
    frame = _current.get()
    if frame is not None:
        return frame.chain, frame.depth, frame.calls
    return _top(caller), 0, _RequestCalls(policy or CallPolicy())


def _top(caller: str | None) -> tuple[str, ...]:
    """The first link of a request's chain: the caller named, else the agent that serves the
    request (so that A -> B -> C -> A is a loop at its first return to A)."""
    top = caller or current_agent()
    return (top,) if top else ()


def _refusal(callee: str, prompt: str, chain: tuple[str, ...], depth: int, calls: _RequestCalls) -> str:
    policy = calls.policy
    path = " -> ".join((*chain, callee))
    if callee in policy.block or (policy.allow is not None and callee not in policy.allow):
        raise CallRefused(f"calling agent {callee!r} is not allowed ({path})", "blocked")
    if depth > policy.max_depth:
        raise CallRefused(f"agent calls nested deeper than {policy.max_depth} were refused ({path})", "depth")
    if callee in chain:
        raise CallRefused(f"a call loop was refused: {path}", "loop")
    key = hashlib.sha256(f"{path}\x00{prompt}".encode()).hexdigest()
    if key in calls.seen:
        raise CallRefused(f"the same call was repeated and refused as a loop: {path}", "loop")
    return key


async def call_agent(
    agent: AbstractAgent | Agent,
    prompt: str,
    *,
    history: Iterable[Message] = (),
    forward: Forwarder | None = None,
    upstream_slush: DataSlush | Mapping[str, object] | None = None,
    caller: str | None = None,
    policy: CallPolicy | None = None,
) -> CallResult:
    """Run `agent` on `prompt` through the facade, guarded; its events go to `forward` if given.

    `caller` names the calling agent when no call is running yet (the top of the chain);
    `policy` applies to the whole request and is taken from the first call.
    """
    handle = agent if isinstance(agent, Agent) else Agent(agent)
    name = agent_name(agent)
    chain, depth, calls = _where(caller, policy)
    key = _refusal(name, prompt, chain, depth + 1, calls)
    calls.seen.add(key)
    messages = tuple(history)
    child = _Frame(chain=(*chain, name), depth=depth + 1, calls=calls)
    upstream = DataSlush.of(upstream_slush) if upstream_slush is not None else None  # a plain dict works too
    child.context = build_context(
        prompt, messages, time_zone=calls.policy.time_zone, upstream_slush=upstream, call_chain=child.chain
    )
    token = _current.set(child)
    try:
        async with handle.stream(prompt, history=messages, forward=forward) as events:
            async for _ in events:
                pass
            result = events.result()
    finally:
        _current.reset(token)
        task = asyncio.current_task()
        if forward is not None and not (task is not None and task.cancelling()):
            await forward.close_open_streams()
    return CallResult(agent_name=name, result=result, slush=child.slush_out)
