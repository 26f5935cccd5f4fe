"""Hosts and specialists for the host tests; factories serve them at /assist (module:attr)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence

from sentient_assist import AbstractAgent, Agent, HostAgent, Query, ResponseHandler, Session, Specialist, call_agent
from sentient_assist.llm.messages import ChatMessage, ToolSpec
from sentient_assist.orchestration import CallPolicy, HandoffLimits
from sentient_assist.orchestration.forwarding import Forwarder
from sentient_assist.testing import FunctionModel, ScriptedCall, ScriptedReply


class Speaker(AbstractAgent):
    """Says its words one by one; `wait_for` makes it wait (bounded) for another speaker to start."""

    def __init__(self, name: str, words: Sequence[str], *, pause: float = 0.0) -> None:
        super().__init__(name)
        self.words = list(words)
        self.pause = pause
        self.started = asyncio.Event()  # set per run; tests that need it make a fresh agent
        self.wait_for: Speaker | None = None

    async def assist(self, session: Session, query: Query, response_handler: ResponseHandler) -> None:
        self.started.set()
        if self.wait_for is not None:
            # Finishes only once the other has started: proves the two run at the same time.
            await asyncio.wait_for(self.wait_for.started.wait(), timeout=5)
        stream = response_handler.create_text_stream("FINAL_RESPONSE")
        for word in self.words:
            await stream.emit_chunk(word)
            await asyncio.sleep(self.pause)
        await stream.complete()
        await response_handler.complete()


class Failing(AbstractAgent):
    name = "failing"

    async def assist(self, session, query, response_handler):
        await response_handler.emit_text_block("STATUS", "trying")
        raise RuntimeError("specialist broke")


class CallsBack(AbstractAgent):
    """Calls the agent it is given: with the host, a loop (host -> calls_back -> host)."""

    name = "calls_back"

    def __init__(self) -> None:
        super().__init__()
        self.target: AbstractAgent | None = None

    async def assist(self, session, query, response_handler):
        await call_agent(self.target, query.prompt, forward=Forwarder(response_handler))
        await response_handler.complete()


class Ring(AbstractAgent):
    """Says it ran, then calls the next agent of its ring, naming no caller: A -> B -> C -> A."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.next: AbstractAgent | None = None

    async def assist(self, session, query, response_handler):
        await response_handler.emit_text_block("RAN", self.name)
        await call_agent(self.next, query.prompt, forward=Forwarder(response_handler))
        await response_handler.complete()


class Nesting(AbstractAgent):
    """Calls a fresh Nesting one level down, `levels` times: deep, but never a loop."""

    def __init__(self, level: int) -> None:
        super().__init__(f"level{level}")
        self.level = level

    async def assist(self, session, query, response_handler):
        await response_handler.emit_text_block("LEVEL", str(self.level))
        await call_agent(Nesting(self.level + 1), query.prompt, forward=Forwarder(response_handler))
        await response_handler.complete()


def handing_off(*targets: str, preamble: str = "Let me hand this over.", task: str | None = None):
    """A host model that hands off to `targets` on the user's turn and answers itself after tool results."""

    def reply(messages: Sequence[ChatMessage], tools: Sequence[ToolSpec]) -> ScriptedReply:
        if messages[-1].role == "tool":
            return ScriptedReply(text="I answered it myself.")
        if not targets:
            return ScriptedReply(text="A direct answer, streamed word by word.")
        arguments = [{"reason": f"{t} fits", **({"task": task} if task else {})} for t in targets]
        return ScriptedReply(
            text=preamble, tool_calls=tuple(ScriptedCall(t, a) for t, a in zip(targets, arguments, strict=False))
        )

    return FunctionModel(reply)


def make_host(*targets: str, **options) -> HostAgent:
    specialists = options.pop("specialists", None) or [
        Specialist(Speaker("alpha", ["alpha ", "speaks ", "first"], pause=0.01), "the first"),
        Specialist(Speaker("beta", ["beta ", "speaks ", "second"]), "the second"),
        Specialist(Failing(), "fails"),
    ]
    return HostAgent(model=handing_off(*targets), specialists=specialists, **options)


# Factories for `ASSIST_AGENT=tests.orchestration.host_agents:<name>`.


def direct_host() -> HostAgent:
    return make_host()


def two_handoffs_host() -> HostAgent:
    return make_host("alpha", "beta")


def unknown_name_host() -> HostAgent:
    return make_host("nobody")


def failing_specialist_host() -> HostAgent:
    return make_host("failing")


def loop_host() -> HostAgent:
    calls_back = CallsBack()
    host = make_host("calls_back", specialists=[Specialist(calls_back, "calls the host back")])
    calls_back.target = host
    return host


def ring() -> Ring:
    """ring_a -> ring_b -> ring_c -> ring_a, ring_a served: the loop is refused at its first
    return to ring_a, which runs once."""
    a, b, c = Ring("ring_a"), Ring("ring_b"), Ring("ring_c")
    a.next, b.next, c.next = b, c, a
    return a


def deep_host() -> HostAgent:
    return make_host("level1", specialists=[Specialist(Nesting(1), "goes deep")], policy=CallPolicy(max_depth=3))


def capped_host() -> HostAgent:
    return make_host("alpha", "beta", limits=HandoffLimits(max_handoffs=1))


# Served hosts for the order and callback cases (one request per test; the log is reset per request).

CALLBACK_LOG: list[str] = []


class Reporter(AbstractAgent):
    """Answers with what the on_handoff callbacks had logged when it started."""

    name = "reporter"

    async def assist(self, session, query, response_handler):
        await response_handler.respond("FINAL_RESPONSE", ",".join(CALLBACK_LOG))


def callbacks_host() -> HostAgent:
    async def first(handoff):
        CALLBACK_LOG.clear()
        await asyncio.sleep(0.05)  # the point: the second callback must wait for the first to end
        CALLBACK_LOG.append(f"first:{handoff.to_agent}")

    async def second(handoff):
        CALLBACK_LOG.append(f"second:{handoff.to_agent}")

    return make_host("reporter", specialists=[Specialist(Reporter(), "reports")], on_handoff=[first, second])


def ordered_host() -> AbstractAgent:
    def build() -> HostAgent:
        alpha = Speaker("alpha", ["a1 ", "a2 ", "a3"], pause=0.02)
        beta = Speaker("beta", ["b1 ", "b2"])
        alpha.wait_for = beta  # alpha ends only after beta has started: they run at the same time
        return make_host("alpha", "beta", specialists=[Specialist(alpha, "first"), Specialist(beta, "second")])

    return _FreshPerRequest(build)


class _FreshPerRequest(AbstractAgent):
    """Builds its host anew for each request, so test speakers never share an Event across requests."""

    name = "host"

    def __init__(self, build) -> None:
        super().__init__()
        self._build = build

    async def assist(self, session, query, response_handler):
        await self._build().assist(session, query, response_handler)


# Across machines: a specialist served by one uvicorn, a host served by another.


def far_speaker() -> Speaker:
    return Speaker("far_alpha", ["from ", "far ", "away"])


def host_of_far_speaker() -> HostAgent:
    """A host whose one specialist is the far speaker at SPECIALIST_URL (another server)."""
    url = os.environ["SPECIALIST_URL"]
    far = Specialist(Agent(url, processor_id="far_alpha"), "speaks from another machine")
    return HostAgent(model=handing_off("far_alpha"), specialists=[far])
