"""Serve AI agents to Sentient Chat, and write them.

    from sentient_assist import AbstractAgent, Query, ResponseHandler, Session

This front door holds what an agent author needs: sentient-agent-framework 0.3.0's seven
top-level names (an agent written for it runs here after changing its import line only),
running agents from Python, language-model agents and their tools, agents working together,
and the service. Everything else lives in a public submodule named for its concept:

- `sentient_assist.events`: the wire's events, reserved event names and their payloads
- `sentient_assist.protocol`: the request: `Request`, `Query`, `Interaction`, `SessionObject`
- `sentient_assist.exceptions`: every exception the framework raises
- `sentient_assist.facade`: `Agent.run()`/`stream()`'s typed results and events
- `sentient_assist.llm`: chat models, messages, tools
- `sentient_assist.orchestration`: hosts, routers, broadcast, sub-agent calls
- `sentient_assist.server`: the ASGI app, its settings and its uvicorn protocol
- `sentient_assist.registry`: finding agents by name
- `sentient_assist.testing`: scripted models and hooks for tests, no network
- `sentient_assist.compat`: 0.3.0's other aliases and openrappter's vocabulary

Names load on first use: writing an agent imports no server, HTTP client, metrics or
terminal library.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sentient_assist._lazy import lazy_exports
from sentient_assist.version import __version__

if TYPE_CHECKING:
    from sentient_assist.compat import DefaultHook, DefaultResponseHandler
    from sentient_assist.facade.agent import Agent, AgentStream
    from sentient_assist.facade.result import AgentResult
    from sentient_assist.llm.agent import LLMAgent, UsageLimits
    from sentient_assist.llm.asking import Approval, AskUser
    from sentient_assist.llm.model import ModelSettings
    from sentient_assist.llm.openai_model import OpenAIChatModel
    from sentient_assist.llm.tools import Tool, tool
    from sentient_assist.orchestration.a2a_agent import A2AAgent
    from sentient_assist.orchestration.broadcast import broadcast_all, chain, fallback, race
    from sentient_assist.orchestration.calls import call_agent
    from sentient_assist.orchestration.host import HostAgent, Specialist
    from sentient_assist.orchestration.router import RouterAgent
    from sentient_assist.orchestration.rules import Router
    from sentient_assist.protocol.request import Query
    from sentient_assist.runtime.agent import AbstractAgent
    from sentient_assist.runtime.hook import Hook
    from sentient_assist.runtime.response_handler import ResponseHandler
    from sentient_assist.runtime.session import Session
    from sentient_assist.runtime.text_stream import StreamEventEmitter
    from sentient_assist.server.app import add_routes, create_app
    from sentient_assist.server.default_server import DefaultServer
    from sentient_assist.server.settings import Settings, load_settings

# The public submodules, each with its __all__: what an agent author may import besides this
# front door (everything else of the package is its implementation). Written here once: this
# docstring, docs/layout.md and tests/test_front_door.py are tested against it.
_PUBLIC_SUBMODULES = (
    "sentient_assist.events",
    "sentient_assist.protocol",
    "sentient_assist.exceptions",
    "sentient_assist.facade",
    "sentient_assist.llm",
    "sentient_assist.orchestration",
    "sentient_assist.server",
    "sentient_assist.registry",
    "sentient_assist.testing",
    "sentient_assist.compat",
)

# Each public name, and the module that defines it: imported when the name is first used.
_HOMES = {
    # sentient-agent-framework 0.3.0's top-level names
    "AbstractAgent": "sentient_assist.runtime.agent",
    "DefaultHook": "sentient_assist.compat",
    "DefaultResponseHandler": "sentient_assist.compat",
    "DefaultServer": "sentient_assist.server.default_server",
    "Query": "sentient_assist.protocol.request",
    "ResponseHandler": "sentient_assist.runtime.response_handler",
    "Session": "sentient_assist.runtime.session",
    # the rest of what an agent touches
    "Hook": "sentient_assist.runtime.hook",
    "StreamEventEmitter": "sentient_assist.runtime.text_stream",
    # running an agent from Python: typed results, in this process or over HTTP
    "Agent": "sentient_assist.facade.agent",
    "AgentResult": "sentient_assist.facade.result",
    "AgentStream": "sentient_assist.facade.agent",
    # language-model agents
    "Approval": "sentient_assist.llm.asking",
    "AskUser": "sentient_assist.llm.asking",
    "LLMAgent": "sentient_assist.llm.agent",
    "ModelSettings": "sentient_assist.llm.model",
    "OpenAIChatModel": "sentient_assist.llm.openai_model",
    "Tool": "sentient_assist.llm.tools",
    "UsageLimits": "sentient_assist.llm.agent",
    "tool": "sentient_assist.llm.tools",
    # agents working together
    "A2AAgent": "sentient_assist.orchestration.a2a_agent",
    "HostAgent": "sentient_assist.orchestration.host",
    "Router": "sentient_assist.orchestration.rules",
    "RouterAgent": "sentient_assist.orchestration.router",
    "Specialist": "sentient_assist.orchestration.host",
    "broadcast_all": "sentient_assist.orchestration.broadcast",
    "call_agent": "sentient_assist.orchestration.calls",
    "chain": "sentient_assist.orchestration.broadcast",
    "fallback": "sentient_assist.orchestration.broadcast",
    "race": "sentient_assist.orchestration.broadcast",
    # the service
    "Settings": "sentient_assist.server.settings",
    "add_routes": "sentient_assist.server.app",
    "create_app": "sentient_assist.server.app",
    "load_settings": "sentient_assist.server.settings",
}

__all__ = [
    "A2AAgent",
    "AbstractAgent",
    "Agent",
    "AgentResult",
    "AgentStream",
    "Approval",
    "AskUser",
    "DefaultHook",
    "DefaultResponseHandler",
    "DefaultServer",
    "Hook",
    "HostAgent",
    "LLMAgent",
    "ModelSettings",
    "OpenAIChatModel",
    "Query",
    "ResponseHandler",
    "Router",
    "RouterAgent",
    "Session",
    "Settings",
    "Specialist",
    "StreamEventEmitter",
    "Tool",
    "UsageLimits",
    "add_routes",
    "broadcast_all",
    "call_agent",
    "chain",
    "create_app",
    "fallback",
    "load_settings",
    "race",
    "tool",
    "__version__",
]
__getattr__, __dir__ = lazy_exports(__name__, _HOMES)
