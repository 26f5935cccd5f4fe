"""Agent.run()/stream(): typed results and events, in-process or over HTTP, one pipeline."""

from app.facade.agent import Agent, AgentStream
from app.facade.events import AgentEvent, EventKind
from app.facade.result import (
    AgentResult,
    ErrorRecord,
    Message,
    PendingInterrupt,
    StageRecord,
    TokenUsage,
    ToolCall,
)

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
