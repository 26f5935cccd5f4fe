"""Small agents for the router and broadcast tests, and the orchestrators that serve them at /assist.

Prompts may carry `markers=<folder>`: a HangingAgent writes `<name>.started` there when it
starts and `<name>.cancelled` when it is cancelled, so a test (in this process or across a
real server) can see that a loser really was stopped.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sentient_assist import AbstractAgent, Query, ResponseHandler, Session
from sentient_assist.compat import current_context, publish_slush
from sentient_assist.orchestration import CallPolicy
from sentient_assist.orchestration.broadcast import FallbackResult, Outcome, RaceResult, chain, fallback, race
from sentient_assist.orchestration.router import RouterAgent
from sentient_assist.orchestration.rules import Router

_MARKERS = re.compile(r"markers=(\S+)")


def marker_folder(prompt: str) -> Path | None:
    found = _MARKERS.search(prompt)
    return Path(found.group(1)) if found else None


class SlushAgent(AbstractAgent):
    """Answers after `delay` seconds and publishes slush saying what it saw upstream.

    With `after_started` (and markers in the prompt) it first waits until those agents have
    started: a race it wins is then surely one its rivals were running in.
    """

    def __init__(
        self, name: str, delay: float = 0.0, confidence: float = 0.8, after_started: Sequence[str] = ()
    ) -> None:
        super().__init__(name)
        self.delay = delay
        self.confidence = confidence
        self.after_started = tuple(after_started)

    async def assist(self, session: Session, query: Query, response_handler: ResponseHandler) -> None:
        folder = marker_folder(query.prompt)
        if folder is not None:
            for _ in range(1000):  # at most ~10 s: a bound, not a timing
                if all((folder / f"{name}.started").exists() for name in self.after_started):
                    break
                await asyncio.sleep(0.01)
        await asyncio.sleep(self.delay)
        context = current_context()
        upstream = context.upstream_slush if context is not None else None
        publish_slush(
            {
                "by": self.name,
                "upstream": upstream.source_agent if upstream is not None else None,
                "upstream_signals": upstream.signals if upstream is not None else None,
                "hints": list(context.orientation.hints) if context is not None else [],
                "chain": list(context.call_chain) if context is not None else [],
            },
            confidence=self.confidence,
        )
        stream = response_handler.create_text_stream("FINAL_RESPONSE")
        await stream.emit_chunk(f"{self.name} answers")
        if upstream is not None:
            await stream.emit_chunk(f" after {upstream.source_agent}")
        await stream.complete()
        await response_handler.complete()


class FailingAgent(AbstractAgent):
    """Fails: with an error event (`mode="error"`) or by raising (`mode="raise"`).

    With `publish`, it leaves slush first, so a fallback hands that on instead of its failure.
    """

    def __init__(self, name: str, mode: str = "error", publish: dict[str, Any] | None = None) -> None:
        super().__init__(name)
        self.mode = mode
        self.publish = publish

    async def assist(self, session: Session, query: Query, response_handler: ResponseHandler) -> None:
        if self.publish is not None:
            publish_slush(self.publish, confidence=0.4)
        if self.mode == "raise":
            raise RuntimeError(f"{self.name} broke")
        await response_handler.emit_error(f"{self.name} could not answer", 502, {"agent": self.name})
        await response_handler.complete()


class HangingAgent(AbstractAgent):
    """Starts an answer, then waits until it is cancelled, and records that it was."""

    async def assist(self, session: Session, query: Query, response_handler: ResponseHandler) -> None:
        folder = marker_folder(query.prompt)
        stream = response_handler.create_text_stream("FINAL_RESPONSE")
        await stream.emit_chunk(f"{self.name} is thinking")
        if folder is not None:
            (folder / f"{self.name}.started").write_text("started")
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            if folder is not None:
                (folder / f"{self.name}.cancelled").write_text("cancelled")
            raise


class EchoAgent(AbstractAgent):
    """Says its name and the prompt: the routed agent of the router tests."""

    async def assist(self, session: Session, query: Query, response_handler: ResponseHandler) -> None:
        await response_handler.emit_text_block("PLAN", f"{self.name} takes it")
        stream = response_handler.create_text_stream("FINAL_RESPONSE")
        await stream.emit_chunk(f"{self.name}: ")
        await stream.emit_chunk(query.prompt)
        await stream.complete()
        await response_handler.complete()


def summary(strategy: str, winner: Outcome | None, outcomes: Sequence[Outcome]) -> dict[str, Any]:
    """A report of a broadcast: statuses and the slush seen, as a JSON document."""
    return {
        "strategy": strategy,
        "winner": winner.agent if winner is not None else None,
        "outcomes": [
            {
                "agent": outcome.agent,
                "status": outcome.status,
                "error": outcome.error,
                "upstream": outcome.upstream_slush.model_dump(mode="json") if outcome.upstream_slush else None,
                "slush": outcome.slush.model_dump(mode="json") if outcome.slush else None,
            }
            for outcome in outcomes
        ],
    }


class _ReportingAgent(AbstractAgent):
    """Runs a broadcast over its agents, then reports: a SUMMARY document and the answer."""

    strategy = ""

    def __init__(self, agents: Sequence[AbstractAgent], name: str | None = None, timeout: float | None = None) -> None:
        super().__init__(name)
        self.agents = tuple(agents)
        self.timeout = timeout

    async def run(self, prompt: str) -> tuple[Outcome | None, Sequence[Outcome]]:
        raise NotImplementedError

    async def assist(self, session: Session, query: Query, response_handler: ResponseHandler) -> None:
        winner, outcomes = await self.run(query.prompt)
        await response_handler.emit_json("SUMMARY", summary(self.strategy, winner, outcomes))
        stream = response_handler.create_text_stream("FINAL_RESPONSE")
        answer = winner.result.text if winner is not None and winner.result is not None else "no agent succeeded"
        await stream.emit_chunk(answer)
        await stream.complete()
        await response_handler.complete()


class RaceAgent(_ReportingAgent):
    name = "race"
    strategy = "race"

    async def run(self, prompt: str) -> tuple[Outcome | None, Sequence[Outcome]]:
        result: RaceResult = await race(self.agents, prompt, timeout=self.timeout, caller=self.name)
        return result.winner, result.outcomes


class FallbackAgent(_ReportingAgent):
    name = "fallback"
    strategy = "fallback"

    async def run(self, prompt: str) -> tuple[Outcome | None, Sequence[Outcome]]:
        result: FallbackResult = await fallback(self.agents, prompt, timeout=self.timeout, caller=self.name)
        return result.winner, result.outcomes


class ChainAgent(_ReportingAgent):
    """The answer is the last agent's, when the whole chain succeeded."""

    name = "chain"
    strategy = "chain"

    async def run(self, prompt: str) -> tuple[Outcome | None, Sequence[Outcome]]:
        outcomes = await chain(self.agents, prompt, timeout=self.timeout, caller=self.name)
        last = outcomes[-1] if outcomes and all(o.ok for o in outcomes) else None
        return last, outcomes


# What the tests run: factories, so that every test (and every server) gets fresh agents.


def make_race() -> RaceAgent:
    """A fast winner, a failure that comes first, and two agents that hang until cancelled."""
    return RaceAgent(
        [
            HangingAgent("slow-1"),
            FailingAgent("broken"),
            SlushAgent("quick", after_started=("slow-1", "slow-2")),
            HangingAgent("slow-2"),
        ]
    )


def make_fallback() -> FallbackAgent:
    """The first fails after publishing slush, the second raises, the third succeeds."""
    return FallbackAgent(
        [
            FailingAgent("first", publish={"tried": "first", "partial": 1}),
            FailingAgent("second", mode="raise"),
            SlushAgent("third"),
            SlushAgent("never"),
        ]
    )


def make_chain() -> ChainAgent:
    return ChainAgent([SlushAgent("A"), SlushAgent("B"), SlushAgent("C")])


def make_router() -> RouterAgent:
    """Routes by prompt, processor_id and metadata; the orchestrators above are routes too."""
    router = Router(default=EchoAgent("echo"))
    router.add(name="race", agent=make_race(), prompt_pattern=r"^race\b", priority=5)
    router.add(name="fallback", agent=make_fallback(), prompt_pattern=r"^fallback\b", priority=5)
    router.add(name="chain", agent=make_chain(), prompt_pattern=r"^chain\b", priority=5)
    router.add(name="vip", agent=EchoAgent("concierge"), processor_id="vip-processor", priority=1)
    router.add(name="questions", agent=EchoAgent("answerer"), metadata={"query.is_question": True}, priority=10)
    router.add(name="blocked", agent=EchoAgent("forbidden"), prompt_pattern=r"^forbidden\b", priority=5)
    router.add(name="strict", agent=make_strict_router(), prompt_pattern=r"^strict\b", priority=5)
    return RouterAgent(router, policy=CallPolicy(block=frozenset({"forbidden"})))


def make_strict_router() -> RouterAgent:
    """No default: a prompt no rule takes is an error event."""
    router = Router()
    router.add(name="hello", agent=EchoAgent("greeter"), prompt_pattern=r"(?i)\bhello\b")
    return RouterAgent(router, name="strict-router")


def who_router() -> RouterAgent:
    """Routes by who sends and to which group, as Sentient Chat records them in the session."""
    router = Router(default=EchoAgent("for-anyone"))
    router.add(name="ana", agent=EchoAgent("for-ana"), sender="ana")
    router.add(name="admins", agent=EchoAgent("for-admins"), group="admins", channel="assist")
    return RouterAgent(router)
