"""Serve AI agents to Sentient Chat. The front door: everything an agent author imports.

    from app import AbstractAgent, DefaultServer, Session, Query, ResponseHandler

The names and signatures are those of sentient-agent-framework 0.3.0, so an
agent written for it runs here after changing its import line only.
"""

from app.facade import (
    Agent,
    AgentEvent,
    AgentResult,
    AgentStream,
    ErrorRecord,
    Message,
    PendingInterrupt,
    StageRecord,
    TokenUsage,
    ToolCall,
)
from app.protocol import (
    DocumentEvent,
    DoneEvent,
    ErrorContent,
    ErrorEvent,
    Interaction,
    Query,
    Request,
    ResponseEvent,
    SessionObject,
    TextBlockEvent,
    TextChunkEvent,
)
from app.registry import available_agents, load_agent
from app.runtime import (
    AbstractAgent,
    AgentError,
    AgentNotFoundError,
    Hook,
    ModelProviderError,
    Identity,
    ProcessorError,
    QueueHook,
    RemoteAgentError,
    ResponseHandler,
    ResponseStreamClosedError,
    Session,
    SettingsError,
    StreamEventEmitter,
    TextStreamClosedError,
)
from app.server import DefaultServer, Settings, add_routes, create_app, load_settings
from app.version import __version__

# The 0.3.0 package's names for the same things.
DefaultHook = QueueHook
DefaultResponseHandler = ResponseHandler
DefaultSession = Session
DefaultTextStream = StreamEventEmitter

__all__ = [
    "AbstractAgent",
    "Agent",
    "AgentEvent",
    "AgentResult",
    "AgentStream",
    "AgentError",
    "AgentNotFoundError",
    "DefaultHook",
    "DefaultResponseHandler",
    "DefaultServer",
    "DefaultSession",
    "DefaultTextStream",
    "DocumentEvent",
    "ErrorRecord",
    "DoneEvent",
    "ErrorContent",
    "ErrorEvent",
    "Hook",
    "Identity",
    "Interaction",
    "Message",
    "ModelProviderError",
    "PendingInterrupt",
    "ProcessorError",
    "Query",
    "QueueHook",
    "RemoteAgentError",
    "Request",
    "ResponseEvent",
    "ResponseHandler",
    "ResponseStreamClosedError",
    "Session",
    "SessionObject",
    "Settings",
    "SettingsError",
    "StageRecord",
    "StreamEventEmitter",
    "TextBlockEvent",
    "TextChunkEvent",
    "TextStreamClosedError",
    "TokenUsage",
    "ToolCall",
    "__version__",
    "add_routes",
    "available_agents",
    "create_app",
    "load_agent",
    "load_settings",
]
