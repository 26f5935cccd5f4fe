"""`app` is the one front door: what it exports is pinned here, and nothing else is a face."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import types
from pathlib import Path

import app
import app.runtime.errors

ROOT = Path(__file__).resolve().parents[1]

EXPORTED = sorted(
    [
        # the author API (sentient-agent-framework 0.3.0's names)
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
        # the wire
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
        # the service
        "Settings",
        "add_routes",
        "available_agents",
        "create_app",
        "load_agent",
        "load_settings",
        # the typed facade
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
        # language-model agents
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
        # orchestration
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
        # exceptions
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
)


def test_the_front_door_exports_exactly_the_public_api():
    assert sorted(app.__all__) == EXPORTED
    assert len(set(app.__all__)) == len(app.__all__)
    for name in app.__all__:
        assert hasattr(app, name), name


def test_nothing_public_is_in_the_front_door_without_being_exported():
    public = {
        name
        for name, value in vars(app).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }
    assert public <= set(app.__all__), public - set(app.__all__)


def test_every_exception_the_framework_raises_is_exported():
    errors = {
        name
        for name, value in vars(app.runtime.errors).items()
        if inspect.isclass(value) and issubclass(value, Exception) and value.__module__ == app.runtime.errors.__name__
    }
    assert errors <= set(app.__all__), errors - set(app.__all__)


def test_the_packages_under_app_are_not_faces():
    for package in pkgutil.walk_packages(app.__path__, "app."):
        if not package.ispkg:
            continue
        module = importlib.import_module(package.name)
        public = {
            name
            for name, value in vars(module).items()
            if not name.startswith("_") and not isinstance(value, types.ModuleType)
        }
        assert public == set(), f"{package.name} re-exports {sorted(public)}: import them from `app`"


def test_the_shipped_agents_import_only_from_app():
    for path in sorted((ROOT / "agents").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "app":
                assert node.module == "app", f"{path.name}: from {node.module} import ..."
            if isinstance(node, ast.Import):
                for alias in node.names:
                    assert alias.name.split(".")[0] != "app" or alias.name == "app", f"{path.name}: import {alias.name}"


# Wire fields that are data, not switches: what an event says, not what the framework does.
BOOLEAN_DATA_FIELDS = {("TextChunkEvent", "is_complete")}


def test_no_public_signature_takes_a_boolean_feature_flag():
    """Optional behaviour is switched on with a CapabilityConfig object (app/runtime/capability.py)."""
    from pydantic import BaseModel

    flags = []
    for name in app.__all__:
        exported = getattr(app, name)
        if inspect.isclass(exported) and issubclass(exported, BaseModel):
            continue  # values: their fields are data
        callables = [(name, exported)] if inspect.isfunction(exported) else []
        if inspect.isclass(exported):
            callables += [
                (f"{name}.{member}", function)
                for member, function in inspect.getmembers(exported, inspect.isfunction)
                if (member == "__init__" or not member.startswith("_"))
                and getattr(function, "__module__", "").startswith("app")
            ]
        for where, function in callables:
            for parameter in inspect.signature(function).parameters.values():
                owner = where.split(".")[0]
                if "bool" in str(parameter.annotation) and (owner, parameter.name) not in BOOLEAN_DATA_FIELDS:
                    flags.append(f"{where}({parameter.name}: {parameter.annotation})")
    assert flags == []
