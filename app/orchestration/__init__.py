"""Agents working together: a host and its specialists, routing, broadcast, sub-agent calls
guarded by depth and loop checks, and context signals and data slush passed between agents."""

from app.orchestration.broadcast import (
    FallbackResult,
    Outcome,
    RaceResult,
    broadcast_all,
    chain,
    fallback,
    race,
    run_one,
)
from app.orchestration.calls import (
    CallPolicy,
    CallResult,
    call_agent,
    calls_of_request,
    check_call,
    current_context,
    publish_slush,
)
from app.orchestration.context import (
    BehaviouralSignals,
    CallContext,
    DataSlush,
    MemoryEcho,
    Orientation,
    QuerySignals,
    TemporalSignals,
    build_context,
)
from app.orchestration.forwarding import Forwarder
from app.orchestration.host import Handoff, HandoffLimits, HostAgent, Specialist
from app.orchestration.router import RouterAgent
from app.orchestration.rules import Route, Router, Rule, request_metadata

__all__ = [
    "BehaviouralSignals",
    "FallbackResult",
    "Outcome",
    "RaceResult",
    "Route",
    "Router",
    "RouterAgent",
    "Rule",
    "broadcast_all",
    "calls_of_request",
    "chain",
    "fallback",
    "race",
    "request_metadata",
    "run_one",
    "CallContext",
    "CallPolicy",
    "CallResult",
    "DataSlush",
    "Forwarder",
    "Handoff",
    "HandoffLimits",
    "HostAgent",
    "MemoryEcho",
    "Orientation",
    "QuerySignals",
    "Specialist",
    "TemporalSignals",
    "build_context",
    "call_agent",
    "check_call",
    "current_context",
    "publish_slush",
]
