"""Agent.run()/stream(): typed results and events, in-process or over HTTP, one pipeline."""

from app.facade.agent import Agent, AgentStream
from app.facade.events import AgentEvent, EventKind
from app.facade.result import (
    AgentResult,
    ErrorRecord,
    PendingInterrupt,
    StageRecord,
    ToolCall,
)
from app.protocol.conventions import TokenUsage
from app.protocol.history import Message

__all__ = [
    "Agent",
    "AgentEvent",
    "AgentResult",
    "AgentStream",
    "ErrorRecord",
    "EventKind",
    "Message",
    "PendingInterrupt",
    "StageRecord",
    "TokenUsage",
    "ToolCall",
]
