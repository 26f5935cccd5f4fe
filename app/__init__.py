"""Serve AI agents to Sentient Chat, and write them. The one front door: everything public is here.

    from app import AbstractAgent, DefaultServer, Query, ResponseHandler, Session

The author API has the names and signatures of sentient-agent-framework 0.3.0, so an agent
written for it runs here after changing its import line only. The modules under `app` are
the implementation: import from `app`, not from them.
"""

from app.facade.agent import Agent, AgentStream
from app.facade.events import AgentEvent, EventKind
from app.facade.result import AgentResult, ErrorRecord, PendingInterrupt, StageRecord, ToolCall
from app.llm.agent import LLMAgent, UsageLimits
from app.llm.asking import Approval, AskUser
from app.llm.messages import ChatMessage, ModelEvent, ReasoningDelta, TextDelta, ToolCallRequest, ToolSpec
from app.llm.model import ChatModel, ModelSettings
from app.llm.openai_model import OpenAIChatModel
from app.llm.scripted import FunctionModel, ScriptedCall, ScriptedModel, ScriptedReply
from app.llm.tools import Tool, ToolOutcome, tool
from app.orchestration.basic_agent import BasicAgent, agent_tool
from app.orchestration.broadcast import (
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
from app.orchestration.host import Handoff, HandoffLimits, HostAgent, Specialist, handoff_callbacks
from app.orchestration.router import RouterAgent
from app.orchestration.rules import Route, Router, Rule, request_metadata
from app.protocol.conventions import (
    ASK_USER,
    FINAL_RESPONSE,
    HANDOFF,
    INTERRUPT,
    OUTPUT,
    STAGE,
    THINKING,
    TOOL_CALL,
    TOOL_RESULT,
    USAGE,
    AskUserPayload,
    HandoffPayload,
    InterruptPayload,
    OutputPayload,
    StagePayload,
    TokenUsage,
    ToolCallPayload,
    ToolResultPayload,
)
from app.protocol.events import (
    AtomicEvent,
    BaseEvent,
    BaseEventType,
    DocumentEvent,
    DoneEvent,
    ErrorContent,
    ErrorEvent,
    Event,
    EventContentType,
    ResponseEvent,
    StreamEvent,
    TextBlockEvent,
    TextChunkEvent,
)
from app.protocol.history import Message
from app.protocol.request import Interaction, Query, Request, SessionObject
from app.registry import available_agents, load_agent
from app.runtime.agent import AbstractAgent, Identity
from app.runtime.capability import CapabilityConfig
from app.runtime.errors import (
    AgentError,
    AgentNotFoundError,
    CallRefused,
    ModelProviderError,
    NoRouteError,
    ProcessorError,
    RemoteAgentError,
    ResponseStreamClosedError,
    SettingsError,
    TextStreamClosedError,
    ToolError,
    UsageLimitExceeded,
)
from app.runtime.hook import Hook, QueueHook
from app.runtime.response_handler import ResponseHandler
from app.runtime.session import Session
from app.runtime.text_stream import StreamEventEmitter
from app.server.app import add_routes, create_app
from app.server.default_server import DefaultServer
from app.server.settings import Settings, load_settings
from app.version import __version__

# The 0.3.0 package's names for the same things.
DefaultHook = QueueHook
DefaultResponseHandler = ResponseHandler
DefaultSession = Session
DefaultTextStream = StreamEventEmitter

__all__ = [
    # The author API (sentient-agent-framework 0.3.0's names)
    "AbstractAgent",
    "DefaultHook",
    "DefaultResponseHandler",
    "DefaultServer",
    "DefaultSession",
    "DefaultTextStream",
    "Hook",
    "Identity",
    "QueueHook",
    "ResponseHandler",
    "Session",
    "StreamEventEmitter",
    # The wire: the request, the events, the reserved event names and their payloads
    "ASK_USER",
    "FINAL_RESPONSE",
    "HANDOFF",
    "INTERRUPT",
    "OUTPUT",
    "STAGE",
    "THINKING",
    "TOOL_CALL",
    "TOOL_RESULT",
    "USAGE",
    "AskUserPayload",
    "AtomicEvent",
    "BaseEvent",
    "BaseEventType",
    "DocumentEvent",
    "DoneEvent",
    "ErrorContent",
    "ErrorEvent",
    "Event",
    "EventContentType",
    "HandoffPayload",
    "Interaction",
    "InterruptPayload",
    "OutputPayload",
    "Message",
    "Query",
    "Request",
    "ResponseEvent",
    "SessionObject",
    "StreamEvent",
    "StagePayload",
    "TextBlockEvent",
    "TextChunkEvent",
    "TokenUsage",
    "ToolCallPayload",
    "ToolResultPayload",
    # The service
    "Settings",
    "add_routes",
    "available_agents",
    "create_app",
    "load_agent",
    "load_settings",
    # Running an agent: typed results and events
    "Agent",
    "AgentEvent",
    "AgentResult",
    "AgentStream",
    "ErrorRecord",
    "EventKind",
    "PendingInterrupt",
    "StageRecord",
    "ToolCall",
    "CapabilityConfig",
    # Language-model agents
    "Approval",
    "AskUser",
    "ChatMessage",
    "ChatModel",
    "FunctionModel",
    "LLMAgent",
    "ModelEvent",
    "ModelSettings",
    "OpenAIChatModel",
    "ReasoningDelta",
    "ScriptedCall",
    "ScriptedModel",
    "ScriptedReply",
    "TextDelta",
    "Tool",
    "ToolCallRequest",
    "ToolOutcome",
    "ToolSpec",
    "UsageLimits",
    "tool",
    # Agents working together
    "BasicAgent",
    "BehaviouralSignals",
    "CallContext",
    "CallPolicy",
    "CallResult",
    "DataSlush",
    "FallbackResult",
    "Forwarder",
    "Handoff",
    "HandoffLimits",
    "HostAgent",
    "MemoryEcho",
    "Orientation",
    "Outcome",
    "QuerySignals",
    "RaceResult",
    "Route",
    "Router",
    "RouterAgent",
    "Rule",
    "Specialist",
    "StopOnFailure",
    "TemporalSignals",
    "agent_tool",
    "broadcast_all",
    "build_context",
    "call_agent",
    "calls_of_request",
    "chain",
    "check_call",
    "handoff_callbacks",
    "current_context",
    "fallback",
    "publish_slush",
    "race",
    "request_metadata",
    "run_one",
    # Every exception the framework raises (app/runtime/errors.py has their tree)
    "AgentError",
    "AgentNotFoundError",
    "CallRefused",
    "ModelProviderError",
    "NoRouteError",
    "ProcessorError",
    "RemoteAgentError",
    "ResponseStreamClosedError",
    "SettingsError",
    "TextStreamClosedError",
    "ToolError",
    "UsageLimitExceeded",
    "__version__",
]
