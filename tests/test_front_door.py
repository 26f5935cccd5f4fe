"""The front door (`sentient_assist`) and the public submodules: what each exports is pinned
here, every public name has one home, and writing an agent loads no server."""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import pkgutil
import subprocess
import sys
import types
from pathlib import Path

import pytest

import sentient_assist

ROOT = Path(__file__).resolve().parents[1]

FRONT_DOOR = [
    # sentient-agent-framework 0.3.0's seven top-level names
    "AbstractAgent",
    "DefaultHook",
    "DefaultResponseHandler",
    "DefaultServer",
    "Query",
    "ResponseHandler",
    "Session",
    # the rest of what an agent touches
    "Hook",
    "StreamEventEmitter",
    # running an agent from Python
    "Agent",
    "AgentResult",
    "AgentStream",
    # language-model agents
    "Approval",
    "AskUser",
    "LLMAgent",
    "ModelSettings",
    "OpenAIChatModel",
    "Tool",
    "UsageLimits",
    "tool",
    # agents working together
    "A2AAgent",
    "HostAgent",
    "Router",
    "RouterAgent",
    "Specialist",
    "broadcast_all",
    "call_agent",
    "chain",
    "fallback",
    "race",
    # the service
    "Settings",
    "add_routes",
    "create_app",
    "load_settings",
    "__version__",
]

SUBMODULES = {
    "sentient_assist.events": [
        "ASK_USER",
        "DEFAULT_ERROR_CODE",
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
        "InterruptPayload",
        "OutputPayload",
        "ResponseEvent",
        "StagePayload",
        "StreamEvent",
        "TextBlockEvent",
        "TextChunkEvent",
        "TokenUsage",
        "ToolCallPayload",
        "ToolResultPayload",
    ],
    "sentient_assist.protocol": ["Interaction", "Message", "Query", "Request", "SessionObject"],
    "sentient_assist.exceptions": [
        "AgentError",
        "AgentNotFoundError",
        "AgentRunError",
        "CallRefused",
        "InputError",
        "ModelProviderError",
        "NoRouteError",
        "PauseRefused",
        "ProcessorError",
        "QuotaReached",
        "RemoteAgentError",
        "ResponseStreamClosedError",
        "SettingsError",
        "StoreUnavailable",
        "TextStreamClosedError",
        "ToolError",
        "UnknownEventId",
        "UsageLimitExceeded",
    ],
    "sentient_assist.facade": [
        "Agent",
        "AgentEvent",
        "AgentResult",
        "AgentStream",
        "ErrorRecord",
        "EventKind",
        "PendingInterrupt",
        "StageRecord",
        "ToolCall",
    ],
    "sentient_assist.llm": [
        "Approval",
        "AskUser",
        "ChatMessage",
        "ChatModel",
        "LLMAgent",
        "LocalChatModel",
        "MCPServerStdio",
        "MCPServerStreamableHTTP",
        "ModelEvent",
        "ModelSettings",
        "OpenAIChatModel",
        "ReasoningDelta",
        "TextDelta",
        "Tool",
        "ToolCallRequest",
        "ToolOutcome",
        "ToolSpec",
        "UsageLimits",
        "tool",
    ],
    "sentient_assist.orchestration": [
        "A2AAgent",
        "CallPolicy",
        "CallResult",
        "FallbackResult",
        "Forwarder",
        "Handoff",
        "HandoffLimits",
        "HostAgent",
        "Outcome",
        "RaceResult",
        "Route",
        "Router",
        "RouterAgent",
        "Rule",
        "Specialist",
        "StopOnFailure",
        "broadcast_all",
        "call_agent",
        "calls_of_request",
        "chain",
        "check_call",
        "fallback",
        "handoff_callbacks",
        "race",
        "request_metadata",
        "run_one",
    ],
    "sentient_assist.server": [
        "BoundedHttpToolsProtocol",
        "DefaultServer",
        "Settings",
        "add_routes",
        "create_app",
        "load_settings",
    ],
    "sentient_assist.registry": ["ENTRY_POINT_GROUP", "available_agents", "load_agent"],
    "sentient_assist.testing": ["FunctionModel", "QueueHook", "ScriptedCall", "ScriptedModel", "ScriptedReply"],
    "sentient_assist.compat": [
        "BasicAgent",
        "BehaviouralSignals",
        "CallContext",
        "CapabilityConfig",
        "DataSlush",
        "DefaultHook",
        "DefaultResponseHandler",
        "DefaultSession",
        "DefaultTextStream",
        "Identity",
        "MemoryEcho",
        "Orientation",
        "QuerySignals",
        "TemporalSignals",
        "agent_tool",
        "build_context",
        "current_context",
        "publish_slush",
    ],
}

# What writing an agent must not load: a server, an HTTP client, metrics, a terminal library.
HEAVY = ("uvicorn", "fastapi", "starlette", "aiohttp", "httpx", "prometheus_client", "rich")


def test_the_front_door_exports_exactly_what_an_author_needs():
    assert sorted(sentient_assist.__all__) == sorted(FRONT_DOOR)
    assert len(sentient_assist.__all__) <= 35
    for name in sentient_assist.__all__:
        assert getattr(sentient_assist, name) is not None, name


def test_the_submodules_pinned_here_are_the_packages_public_submodules():
    assert list(SUBMODULES) == list(sentient_assist._PUBLIC_SUBMODULES)


@pytest.mark.parametrize("module_name", sorted(SUBMODULES))
def test_each_public_submodule_exports_exactly_its_names(module_name):
    module = importlib.import_module(module_name)
    assert sorted(module.__all__) == sorted(SUBMODULES[module_name])
    for name in module.__all__:
        assert hasattr(module, name), f"{module_name}.{name}"


def test_nothing_public_is_in_a_face_without_being_exported():
    for module_name in ["sentient_assist", *SUBMODULES.keys() - {"sentient_assist.registry"}]:
        module = importlib.import_module(module_name)
        public = {
            name
            for name, value in vars(module).items()
            if not name.startswith("_")
            and not isinstance(value, types.ModuleType)
            and name not in {"TYPE_CHECKING", "annotations", "lazy_exports"}
        }
        loaded_submodules = {name for name, value in vars(module).items() if isinstance(value, types.ModuleType)}
        assert public - loaded_submodules <= set(module.__all__), (module_name, public - set(module.__all__))


def test_every_public_name_is_one_type_whatever_face_it_is_taken_from():
    homes: dict[str, object] = {}
    for module_name in ["sentient_assist", *SUBMODULES]:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            value = getattr(module, name)
            assert homes.setdefault(name, value) is value, f"{module_name}.{name} is another object"


def test_the_0_3_0_module_paths_have_counterparts():
    """`sentient_agent_framework.interface.events` and `.exceptions`: their names are here."""
    events = importlib.import_module("sentient_agent_framework.interface.events")
    exceptions = importlib.import_module("sentient_agent_framework.interface.exceptions")
    ours_events = importlib.import_module("sentient_assist.events")
    ours_exceptions = importlib.import_module("sentient_assist.exceptions")
    for name, value in vars(events).items():
        if inspect.isclass(value) and value.__module__ == events.__name__:
            assert hasattr(ours_events, name), f"sentient_assist.events.{name}"
    for name, value in vars(exceptions).items():
        if inspect.isclass(value) and value.__module__ == exceptions.__name__:
            assert hasattr(ours_exceptions, name), f"sentient_assist.exceptions.{name}"
    original = importlib.import_module("sentient_agent_framework")
    for name in vars(original):
        if not name.startswith("_") and name not in {"implementation", "interface"}:
            assert name in sentient_assist.__all__, name


def test_unknown_names_are_an_attribute_error_naming_the_module():
    with pytest.raises(AttributeError, match=r"sentient_assist.*NoSuchThing"):
        _ = sentient_assist.NoSuchThing  # type: ignore[attr-defined]
    with pytest.raises(ImportError):
        exec("from sentient_assist import ScriptedModel", {})


def _fresh_interpreter(code: str) -> dict:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_writing_an_agent_loads_no_server_http_client_metrics_or_terminal_library():
    loaded = _fresh_interpreter(
        "import json, sys\n"
        "from sentient_assist import AbstractAgent, Agent, LLMAgent, HostAgent, RouterAgent, tool, Settings\n"
        "from sentient_assist.events import FINAL_RESPONSE\n"
        "from sentient_assist.testing import ScriptedModel\n"
        "from sentient_assist.compat import BasicAgent\n"
        f"print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r})))\n"
    )
    assert loaded == []


def test_the_service_loads_them_when_it_is_used():
    loaded = _fresh_interpreter(
        "import json, sys\n"
        "from sentient_assist import create_app\n"
        f"print(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r}))))\n"
    )
    assert "fastapi" in loaded


def test_no_internal_package_is_a_face():
    """Packages that are not public submodules export nothing: they are the implementation."""
    for package in pkgutil.walk_packages(sentient_assist.__path__, "sentient_assist."):
        if not package.ispkg or package.name in SUBMODULES:
            continue
        module = importlib.import_module(package.name)
        public = {
            name
            for name, value in vars(module).items()
            if not name.startswith("_") and not isinstance(value, types.ModuleType)
        }
        assert public == set(), f"{package.name} exports {sorted(public)}"


def test_agents_import_only_from_the_public_faces():
    faces = {"sentient_assist", *SUBMODULES}
    paths = [*sorted((ROOT / "agents").glob("*.py")), *sorted((ROOT / "sentient_assist" / "agents").glob("*.py"))]
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                if node.module.split(".")[0] == "sentient_assist":
                    assert node.module in faces, f"{path.name}: from {node.module} import ..."


# Wire fields that are data, not switches: what an event says, not what the framework does.
BOOLEAN_DATA_FIELDS = {("TextChunkEvent", "is_complete")}


def test_no_public_signature_takes_a_boolean_feature_flag():
    """Optional behaviour is switched on with a CapabilityConfig object (sentient_assist/runtime/capability.py)."""
    from pydantic import BaseModel

    flags = []
    exported = {
        name: getattr(importlib.import_module(module_name), name)
        for module_name in ["sentient_assist", *SUBMODULES]
        for name in importlib.import_module(module_name).__all__
    }
    for name, value in exported.items():
        if inspect.isclass(value) and issubclass(value, BaseModel):
            continue  # values: their fields are data
        callables = [(name, value)] if inspect.isfunction(value) else []
        if inspect.isclass(value):
            callables += [
                (f"{name}.{member}", function)
                for member, function in inspect.getmembers(value, inspect.isfunction)
                if (member == "__init__" or not member.startswith("_"))
                and getattr(function, "__module__", "").startswith("sentient_assist")
            ]
        for where, function in callables:
            for parameter in inspect.signature(function).parameters.values():
                owner = where.split(".")[0]
                if "bool" in str(parameter.annotation) and (owner, parameter.name) not in BOOLEAN_DATA_FIELDS:
                    flags.append(f"{where}({parameter.name}: {parameter.annotation})")
    assert flags == []
