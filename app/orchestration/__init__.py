"""Agents working together: a host and its specialists, routing, broadcast, sub-agent calls
guarded by depth and loop checks, and context signals and data slush passed between agents."""

from app.orchestration.calls import (
    CallPolicy,
    CallResult,
    call_agent,
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

__all__ = [
    "BehaviouralSignals",
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
