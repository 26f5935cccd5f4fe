"""Broadcast: one prompt to several agents, four ways.

- `broadcast_all`: every agent at once; an outcome per agent, in the agents' order.
- `race`: every agent at once; the first success wins and the rest are cancelled.
- `fallback`: one after another until one succeeds; each failure's slush goes on to the next.
- `chain`: one after another; each agent's slush is the next one's `upstream_slush`.

Every call goes through call_agent(), so the depth, loop and allow/block guards apply (a
refused call is an outcome with status "refused", not an exception). Success means the call
finished, was not cancelled, and its result has no errors. A per-agent `timeout` cancels a
call that runs past it ("timeout"). Cancelling the caller cancels every agent still running,
and waits for them. All state lives in the call: nothing is kept on an agent.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from sentient_assist.facade.agent import Agent
from sentient_assist.facade.result import AgentResult
from sentient_assist.orchestration.calls import CallPolicy, agent_name, call_agent, calls_of_request
from sentient_assist.orchestration.context import DataSlush
from sentient_assist.protocol.history import Message
from sentient_assist.runtime.agent import AbstractAgent
from sentient_assist.runtime.capability import CapabilityConfig
from sentient_assist.runtime.errors import CallRefused

Status = Literal["ok", "failed", "timeout", "cancelled", "refused"]
AnyAgent = AbstractAgent | Agent


class Outcome(BaseModel):
    """How one agent's call went: `result` when it finished, `error` when it did not succeed,
    `slush` what it published, `upstream_slush` what it was given."""

    model_config = ConfigDict(frozen=True)

    agent: str
    status: Status
    result: AgentResult[Any] | None = None
    error: str | None = None
    slush: DataSlush | None = None
    upstream_slush: DataSlush | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def failure_slush(self) -> DataSlush:
        """What a failed call hands on when it published nothing: that it failed, and why."""
        return DataSlush(
            source_agent=self.agent,
            signals={"failed": True, "status": self.status, "error": self.error},
            confidence=0.0,
        )

    def handed_on(self) -> DataSlush | None:
        """The slush the next agent gets: what this one published; else its failure, if it failed."""
        if self.slush is not None:
            return self.slush
        return None if self.ok else self.failure_slush()


class RaceResult(BaseModel):
    """The first success (None if none succeeded) and every agent's outcome, in the agents' order."""

    model_config = ConfigDict(frozen=True)

    winner: Outcome | None
    outcomes: tuple[Outcome, ...]


class FallbackResult(BaseModel):
    """The agent that succeeded (None if none did) and the outcomes of those that ran, in order."""

    model_config = ConfigDict(frozen=True)

    winner: Outcome | None
    outcomes: tuple[Outcome, ...]


async def run_one(
    agent: AnyAgent,
    prompt: str,
    *,
    history: Iterable[Message] = (),
    timeout: float | None = None,
    upstream_slush: DataSlush | None = None,
    caller: str | None = None,
    policy: CallPolicy | None = None,
) -> Outcome:
    """One guarded call as an Outcome; it raises only when the caller itself is cancelled."""
    name = agent_name(agent)
    try:
        async with asyncio.timeout(timeout) as deadline:
            call = await call_agent(
                agent, prompt, history=history, upstream_slush=upstream_slush, caller=caller, policy=policy
            )
    except CallRefused as exc:
        return Outcome(agent=name, upstream_slush=upstream_slush, status="refused", error=str(exc))
    except TimeoutError as exc:
        if deadline.expired():
            return Outcome(
                agent=name,
                upstream_slush=upstream_slush,
                status="timeout",
                error=f"no answer within {timeout}s; the call was cancelled",
            )
        return Outcome(agent=name, upstream_slush=upstream_slush, status="failed", error=_describe(exc))
    except Exception as exc:  # a remote agent that refused the request or cut its stream
        return Outcome(agent=name, upstream_slush=upstream_slush, status="failed", error=_describe(exc))
    result = call.result
    if result.cancelled:
        status: Status = "cancelled"
        error: str | None = "the run was cancelled"
    elif result.errors:
        status, error = "failed", "; ".join(f"{e.message} ({e.code})" for e in result.errors)
    else:
        status, error = "ok", None
    return Outcome(
        agent=name, upstream_slush=upstream_slush, status=status, result=result, error=error, slush=call.slush
    )


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


async def broadcast_all(
    agents: Sequence[AnyAgent],
    prompt: str,
    *,
    history: Iterable[Message] = (),
    timeout: float | None = None,
    upstream_slush: DataSlush | None = None,
    caller: str | None = None,
    policy: CallPolicy | None = None,
) -> list[Outcome]:
    """Every agent at once; their outcomes in the agents' order. One failing fails only itself."""
    with calls_of_request(caller, policy):  # concurrent or not, one request's calls
        messages = tuple(history)
        async with asyncio.TaskGroup() as group:
            tasks = [
                group.create_task(
                    run_one(
                        agent,
                        prompt,
                        history=messages,
                        timeout=timeout,
                        upstream_slush=upstream_slush,
                        caller=caller,
                        policy=policy,
                    ),
                    name=f"broadcast:{agent_name(agent)}",
                )
                for agent in agents
            ]
        return [task.result() for task in tasks]


async def race(
    agents: Sequence[AnyAgent],
    prompt: str,
    *,
    history: Iterable[Message] = (),
    timeout: float | None = None,
    upstream_slush: DataSlush | None = None,
    caller: str | None = None,
    policy: CallPolicy | None = None,
) -> RaceResult:
    """Every agent at once; the first success wins, the others are cancelled ("cancelled").

    A failure does not end the race; when every agent fails there is no winner. Of successes
    seen at the same moment, the first in the agents' order wins.
    """
    with calls_of_request(caller, policy):  # concurrent or not, one request's calls
        messages = tuple(history)
        tasks = [
            asyncio.create_task(
                run_one(
                    agent,
                    prompt,
                    history=messages,
                    timeout=timeout,
                    upstream_slush=upstream_slush,
                    caller=caller,
                    policy=policy,
                ),
                name=f"race:{agent_name(agent)}",
            )
            for agent in agents
        ]
        winner: Outcome | None = None
        try:
            pending = set(tasks)
            while pending and winner is None:
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for task in tasks:
                    if task in done and task.result().ok:
                        winner = task.result()
                        break
        finally:
            # Reached by a win, by every agent having ended, or by the caller being cancelled.
            await _cancel_and_wait(tasks)
        outcomes = tuple(
            Outcome(
                agent=agent_name(agent),
                status="cancelled",
                error="cancelled: another agent won the race",
                upstream_slush=upstream_slush,
            )
            if task.cancelled()
            else task.result()
            for agent, task in zip(agents, tasks, strict=False)
        )
        return RaceResult(winner=winner, outcomes=outcomes)


async def _cancel_and_wait(tasks: list[asyncio.Task[Outcome]]) -> None:
    for task in tasks:
        task.cancel()
    # Waiting is what makes "cancelled" true: each agent has stopped when this returns.
    await asyncio.gather(*tasks, return_exceptions=True)


async def fallback(
    agents: Sequence[AnyAgent],
    prompt: str,
    *,
    history: Iterable[Message] = (),
    timeout: float | None = None,
    upstream_slush: DataSlush | None = None,
    caller: str | None = None,
    policy: CallPolicy | None = None,
) -> FallbackResult:
    """One agent after another until one succeeds.

    Each failed agent's slush (what it published, else a slush saying it failed and why, with
    confidence 0) becomes the next agent's `upstream_slush`.
    """
    with calls_of_request(caller, policy):  # concurrent or not, one request's calls
        messages = tuple(history)
        outcomes: list[Outcome] = []
        slush = upstream_slush
        for agent in agents:
            outcome = await run_one(
                agent, prompt, history=messages, timeout=timeout, upstream_slush=slush, caller=caller, policy=policy
            )
            outcomes.append(outcome)
            if outcome.ok:
                return FallbackResult(winner=outcome, outcomes=tuple(outcomes))
            slush = outcome.handed_on()
        return FallbackResult(winner=None, outcomes=tuple(outcomes))


@dataclass(frozen=True)
class StopOnFailure(CapabilityConfig):
    """A chain stops once `after` of its agents have failed (the first failure, by default)."""

    after: int = 1

    def __post_init__(self) -> None:
        if isinstance(self.after, bool) or not isinstance(self.after, int) or self.after < 1:
            raise ValueError(f"StopOnFailure(after=...) must be an int of 1 or more, got {self.after!r}")


async def chain(
    agents: Sequence[AnyAgent],
    prompt: str,
    *,
    history: Iterable[Message] = (),
    timeout: float | None = None,
    upstream_slush: DataSlush | None = None,
    caller: str | None = None,
    policy: CallPolicy | None = None,
    stop_on_failure: StopOnFailure | None = None,
) -> list[Outcome]:
    """One agent after another, each given the previous one's slush as `upstream_slush`.

    An agent that succeeds without publishing hands on nothing (the next starts afresh); one
    that fails hands on what it published, else its failure. With `stop_on_failure`, the
    chain ends once that many agents have failed, and the outcomes so far are returned.
    """
    failures = 0
    with calls_of_request(caller, policy):  # concurrent or not, one request's calls
        messages = tuple(history)
        outcomes: list[Outcome] = []
        slush = upstream_slush
        for agent in agents:
            outcome = await run_one(
                agent, prompt, history=messages, timeout=timeout, upstream_slush=slush, caller=caller, policy=policy
            )
            outcomes.append(outcome)
            failures += not outcome.ok
            if stop_on_failure is not None and failures >= stop_on_failure.after:
                break
            slush = outcome.handed_on()
    return outcomes
