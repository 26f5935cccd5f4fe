"""Agents working together: a host handing off to specialists (`HostAgent`, `Specialist`),
routing by rules (`RouterAgent`, `Router`), broadcast (`broadcast_all`, `race`, `fallback`,
`chain`), sub-agent calls guarded by depth and loop checks (`call_agent`), and forwarding a
sub-agent's events. openrappter's vocabulary (BasicAgent, context signals, data slush) is in
`sentient_assist.compat`."""

from typing import TYPE_CHECKING

from sentient_assist._lazy import lazy_exports

if TYPE_CHECKING:
    from sentient_assist.orchestration.a2a_agent import A2AAgent
    from sentient_assist.orchestration.broadcast import (
        FallbackResult,
        Outcome,
        RaceResult,
        StopOnFailure,
        broadcast_all,
        chain,
        fallback,
        race,
        run_one,
    )
    from sentient_assist.orchestration.calls import CallPolicy, CallResult, call_agent, calls_of_request, check_call
    from sentient_assist.orchestration.forwarding import Forwarder
    from sentient_assist.orchestration.host import Handoff, HandoffLimits, HostAgent, Specialist, handoff_callbacks
    from sentient_assist.orchestration.router import RouterAgent
    from sentient_assist.orchestration.rules import Route, Router, Rule, request_metadata

_HOMES = {
    "A2AAgent": "sentient_assist.orchestration.a2a_agent",
    "CallPolicy": "sentient_assist.orchestration.calls",
    "CallResult": "sentient_assist.orchestration.calls",
    "FallbackResult": "sentient_assist.orchestration.broadcast",
    "Forwarder": "sentient_assist.orchestration.forwarding",
    "Handoff": "sentient_assist.orchestration.host",
    "HandoffLimits": "sentient_assist.orchestration.host",
    "HostAgent": "sentient_assist.orchestration.host",
    "Outcome": "sentient_assist.orchestration.broadcast",
    "RaceResult": "sentient_assist.orchestration.broadcast",
    "Route": "sentient_assist.orchestration.rules",
    "Router": "sentient_assist.orchestration.rules",
    "RouterAgent": "sentient_assist.orchestration.router",
    "Rule": "sentient_assist.orchestration.rules",
    "Specialist": "sentient_assist.orchestration.host",
    "StopOnFailure": "sentient_assist.orchestration.broadcast",
    "broadcast_all": "sentient_assist.orchestration.broadcast",
    "call_agent": "sentient_assist.orchestration.calls",
    "calls_of_request": "sentient_assist.orchestration.calls",
    "chain": "sentient_assist.orchestration.broadcast",
    "check_call": "sentient_assist.orchestration.calls",
    "fallback": "sentient_assist.orchestration.broadcast",
    "handoff_callbacks": "sentient_assist.orchestration.host",
    "race": "sentient_assist.orchestration.broadcast",
    "request_metadata": "sentient_assist.orchestration.rules",
    "run_one": "sentient_assist.orchestration.broadcast",
}
__all__ = [
    "A2AAgent",
    "CallPolicy",
    "CallResult",
    "FallbackResult",
    "Forwarder",
    "Handoff",
    "HandoffLimits",
    "HostAgent",
    "Outcome",
    "RaceResult",
    "Route",
    "Router",
    "RouterAgent",
    "Rule",
    "Specialist",
    "StopOnFailure",
    "broadcast_all",
    "call_agent",
    "calls_of_request",
    "chain",
    "check_call",
    "fallback",
    "handoff_callbacks",
    "race",
    "request_metadata",
    "run_one",
]
__getattr__, __dir__ = lazy_exports(__name__, _HOMES)
