"""What an agent touches: AbstractAgent, ResponseHandler, text streams, hooks, ids, errors."""

from app.runtime.agent import AbstractAgent, Identity
from app.runtime.channel import Channel
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
from app.runtime.ids import MonotonicUlid
from app.runtime.response_handler import ResponseHandler, check_event_name
from app.runtime.run import ChannelHook, Run, RunStats
from app.runtime.session import Interactions, Session
from app.runtime.text_stream import StreamEventEmitter

__all__ = [
    "AbstractAgent",
    "AgentError",
    "AgentNotFoundError",
    "CallRefused",
    "Channel",
    "ChannelHook",
    "Hook",
    "Identity",
    "Interactions",
    "ModelProviderError",
    "MonotonicUlid",
    "NoRouteError",
    "ProcessorError",
    "QueueHook",
    "RemoteAgentError",
    "ResponseHandler",
    "ResponseStreamClosedError",
    "Run",
    "RunStats",
    "Session",
    "SettingsError",
    "StreamEventEmitter",
    "TextStreamClosedError",
    "ToolError",
    "UsageLimitExceeded",
    "check_event_name",
]
