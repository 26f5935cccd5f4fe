"""Other frameworks' names for what is here, so their agents port by their import line.

sentient-agent-framework 0.3.0: `DefaultHook`, `DefaultResponseHandler`, `DefaultSession`,
`DefaultTextStream` (its implementations of `Hook`, `ResponseHandler`, `Session` and the text
stream), `Identity`, `CapabilityConfig`.

openrappter: `BasicAgent` (`metadata` and `perform(**kwargs)`), `agent_tool` (a BasicAgent as
an LLMAgent's tool), and the context it reads: `CallContext` and its signals, `DataSlush`
passed down a chain, `build_context`, `publish_slush`, `current_context`.
"""

from sentient_assist.orchestration.basic_agent import BasicAgent, agent_tool
from sentient_assist.orchestration.calls import current_context, publish_slush
from sentient_assist.orchestration.context import (
    BehaviouralSignals,
    CallContext,
    DataSlush,
    MemoryEcho,
    Orientation,
    QuerySignals,
    TemporalSignals,
    build_context,
)
from sentient_assist.runtime.agent import Identity
from sentient_assist.runtime.capability import CapabilityConfig

# sentient-agent-framework 0.3.0's names for the same types.
from sentient_assist.runtime.hook import QueueHook as DefaultHook
from sentient_assist.runtime.response_handler import ResponseHandler as DefaultResponseHandler
from sentient_assist.runtime.session import Session as DefaultSession
from sentient_assist.runtime.text_stream import StreamEventEmitter as DefaultTextStream

__all__ = [
    # sentient-agent-framework 0.3.0
    "CapabilityConfig",
    "DefaultHook",
    "DefaultResponseHandler",
    "DefaultSession",
    "DefaultTextStream",
    "Identity",
    # openrappter
    "BasicAgent",
    "BehaviouralSignals",
    "CallContext",
    "DataSlush",
    "MemoryEcho",
    "Orientation",
    "QuerySignals",
    "TemporalSignals",
    "agent_tool",
    "build_context",
    "current_context",
    "publish_slush",
]
