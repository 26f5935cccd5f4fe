"""Running an agent from Python: `Agent(...).run()` / `.stream()` / `.run_sync()`, in this
process or over HTTP, one pipeline; the typed result (`AgentResult` and its records) and the
typed events of a stream (`AgentEvent`, `EventKind`)."""

from typing import TYPE_CHECKING

from sentient_assist._lazy import lazy_exports

if TYPE_CHECKING:
    from sentient_assist.facade.agent import Agent, AgentStream
    from sentient_assist.facade.events import AgentEvent, EventKind
    from sentient_assist.facade.result import AgentResult, ErrorRecord, PendingInterrupt, StageRecord, ToolCall

_HOMES = {
    "Agent": "sentient_assist.facade.agent",
    "AgentEvent": "sentient_assist.facade.events",
    "AgentResult": "sentient_assist.facade.result",
    "AgentStream": "sentient_assist.facade.agent",
    "ErrorRecord": "sentient_assist.facade.result",
    "EventKind": "sentient_assist.facade.events",
    "PendingInterrupt": "sentient_assist.facade.result",
    "StageRecord": "sentient_assist.facade.result",
    "ToolCall": "sentient_assist.facade.result",
}
__all__ = [
    "Agent",
    "AgentEvent",
    "AgentResult",
    "AgentStream",
    "ErrorRecord",
    "EventKind",
    "PendingInterrupt",
    "StageRecord",
    "ToolCall",
]
__getattr__, __dir__ = lazy_exports(__name__, _HOMES)
