"""BasicAgent: openrappter's agent contract, here. An agent written for openrappter runs with
only its import line changed (`from sentient_assist import BasicAgent`):

    class WeatherAgent(BasicAgent):
        def __init__(self):
            self.name = "Weather"
            self.metadata = {"name": self.name, "description": "...", "parameters": {...}}
            super().__init__(name=self.name, metadata=self.metadata)

        def perform(self, **kwargs):            # or `async def perform`
            city = kwargs.get("city") or self.get_signal("upstream_slush.signals.city", "Oslo")
            return json.dumps({"status": "success", "response": f"Sunny in {city}",
                               "data_slush": self.slush_out(signals={"city": city})})

- `execute(**kwargs)` sloshes (builds the context), runs `perform()`, then takes the
  result's `data_slush` as `last_data_slush`; `upstream_slush=` (a plain dict) is merged
  into the context as `upstream_slush`. With a sync `perform` it returns its result; with
  an async one, an awaitable of it.
- `self.context` and `self.get_signal("a.b")` read the context of the call running now:
  kept per call (a context variable), never shared between concurrent requests.
- At `/assist`, the prompt becomes `perform(query=prompt)` (a prompt that is a JSON object
  becomes the keyword arguments); a JSON result is sent as a `RESULT` document and its
  `response` (or `message`, or `result`) as the answer; a text result is the answer.
- It is an agent like any other: a specialist of a host, a step of `chain`/`broadcast`,
  and a tool of an `LLMAgent` (`tools=[WeatherAgent()]`, made one by `agent_tool()`, which
  sets another timeout: its `metadata` is the schema).
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import json
from collections.abc import Awaitable, Mapping
from datetime import datetime
from typing import Any, cast

from sentient_assist.llm.messages import ToolSpec
from sentient_assist.llm.tools import DEFAULT_TOOL_TIMEOUT, Tool, ToolOutcome
from sentient_assist.orchestration.calls import current_context, in_a_call, publish_slush
from sentient_assist.orchestration.context import CallContext, DataSlush, build_context
from sentient_assist.protocol.json_value import JSONObject, JSONValue
from sentient_assist.protocol.request import Query
from sentient_assist.runtime.agent import AbstractAgent
from sentient_assist.runtime.response_handler import ResponseHandler
from sentient_assist.runtime.session import Session

RESULT_EVENT = "RESULT"
_ANSWER_KEYS = ("response", "message", "result")

_context: contextvars.ContextVar[dict[str, object] | None] = contextvars.ContextVar("basic_agent_context", default=None)


class BasicAgent(AbstractAgent):
    """An openrappter agent: `metadata` (name, description, JSON Schema `parameters`) and
    `perform(**kwargs)`, run through `execute()`."""

    def __init__(self, name: str | None = None, metadata: Mapping[str, Any] | None = None) -> None:
        metadata = dict(metadata if metadata is not None else getattr(self, "metadata", None) or {})
        name = name or getattr(self, "name", None) or metadata.get("name") or type(self).__name__
        super().__init__(name)
        metadata.setdefault("name", name)
        metadata.setdefault("description", self.description or name)
        metadata.setdefault("parameters", {"type": "object", "properties": {}})
        self.metadata = metadata
        self.description = str(metadata["description"])
        self._last_data_slush: JSONValue = None

    def as_tool(self) -> Tool:
        """This agent as a tool of an LLMAgent (`agent_tool(self)`): what `LLMAgent(tools=[agent])` makes of it."""
        return agent_tool(self)

    # --- openrappter's API ------------------------------------------------------------

    def perform(self, **kwargs: Any) -> object:
        """Override: the agent's work. The context is `self.context`; return JSON (a str or a dict)."""
        raise NotImplementedError(f"{type(self).__name__} must define perform(**kwargs)")

    def execute(self, **kwargs: Any) -> object:
        """Slosh, perform, then keep the result's `data_slush` (see the module's docstring).
        With an async `perform`, a coroutine: the context is set where it is awaited."""
        upstream = kwargs.pop("upstream_slush", None)
        if inspect.iscoroutinefunction(self.perform):
            return self._execute_async(upstream, kwargs)
        token = _context.set(self._sloshed(upstream, kwargs))
        try:
            result = self.perform(**kwargs)
        finally:
            _context.reset(token)
        self._keep_slush(result)
        return result

    async def _execute_async(self, upstream: object, kwargs: dict[str, object]) -> object:
        token = _context.set(self._sloshed(upstream, kwargs))
        try:
            result = await cast(Awaitable[object], self.perform(**kwargs))  # an async perform
        finally:
            _context.reset(token)
        self._keep_slush(result)
        return result

    def _sloshed(self, upstream: object, kwargs: Mapping[str, object]) -> dict[str, object]:
        context = self.slosh(_query_text(kwargs))
        if upstream is not None:
            context["upstream_slush"] = _as_dict(upstream)
        return context

    @property
    def context(self) -> dict[str, Any]:
        """The context of the call running now ({} outside one)."""
        return _context.get() or {}

    def get_signal(self, key: str, default: Any = None) -> Any:
        """A signal of the context by dot path: `temporal.time_of_day`, `query.intent`,
        `upstream_slush.signals.city` (or `upstream_slush.city`: one of its signals)."""
        parts = key.split(".")
        upstream = self.context.get("upstream_slush")
        if parts[0] == "upstream_slush" and len(parts) > 1 and isinstance(upstream, Mapping):
            if parts[1] not in upstream and isinstance(upstream.get("signals"), Mapping):
                parts.insert(1, "signals")
        value: object = self.context
        for part in parts:
            if not isinstance(value, Mapping) or part not in value:
                return default
            value = value[part]
        return value

    def slosh(self, query: str = "") -> dict[str, object]:
        """The context for `query`: the orchestrated call's own when there is one (its history
        and upstream slush), else built from the query alone. Cheap and bounded (no model)."""
        called = current_context()  # the call's, or the served request's
        return openrappter_context(called or build_context(query))

    def slush_out(
        self, *, agent_name: str | None = None, confidence: float | None = None, signals: object = None, **extra: object
    ) -> dict[str, object]:
        """A `data_slush` dict for the next agent, as openrappter builds it."""
        slush: dict[str, object] = {"source_agent": agent_name or self.name, "timestamp": datetime.now().isoformat()}
        orientation = self.context.get("orientation")
        if orientation:
            slush["orientation"] = {"confidence": orientation["confidence"], "approach": orientation["approach"]}
        if confidence is not None:
            slush["confidence"] = confidence
        if signals:
            slush["signals"] = signals
        slush.update(extra)
        return slush

    @property
    def last_data_slush(self) -> JSONValue:
        """The `data_slush` of the last `execute()` of this agent (None if it left none)."""
        return self._last_data_slush

    # --- as an agent of this service ---------------------------------------------------

    async def assist(self, session: Session, query: Query, response_handler: ResponseHandler) -> None:
        result = await self.run_execute(**_kwargs_of(query.prompt))
        await self._answer(result, response_handler)

    async def run_execute(self, **kwargs: Any) -> object:
        """`execute()` from async code: an async `perform` awaited, a sync one in a thread."""
        if inspect.iscoroutinefunction(self.perform):
            return await cast(Awaitable[object], self.execute(**kwargs))  # _execute_async's coroutine
        return await asyncio.to_thread(self.execute, **kwargs)

    async def _answer(self, result: object, handler: ResponseHandler) -> None:
        parsed = _parsed(result)
        slush = self._last_data_slush
        if slush is not None and in_a_call():  # what it leaves goes on to the next agent
            signals = slush.get("signals", slush) if isinstance(slush, dict) else {"value": slush}
            publish_slush(signals if isinstance(signals, dict) else {"value": signals})
        if isinstance(parsed, dict):
            await handler.emit_json(RESULT_EVENT, parsed)
            text = next((parsed[k] for k in _ANSWER_KEYS if isinstance(parsed.get(k), str)), None)
        else:
            text = result if isinstance(result, str) else (None if result is None else json.dumps(result))
        if text:
            stream = handler.create_text_stream("FINAL_RESPONSE")
            await stream.emit_chunk(text)
            await stream.complete()
        await handler.complete()

    def _keep_slush(self, result: object) -> None:
        parsed = _parsed(result)
        self._last_data_slush = parsed.get("data_slush") if isinstance(parsed, dict) else None


def agent_tool(agent: BasicAgent, *, timeout: float = DEFAULT_TOOL_TIMEOUT) -> Tool:
    """`agent` as a tool of an LLMAgent: its metadata is the tool's schema; a call runs
    `execute()`, within `timeout` seconds as any tool."""
    return _AgentTool(agent, timeout)


class _AgentTool(Tool):
    """A Tool whose schema is the agent's `metadata` and whose call is its `execute()`; the
    timeout, the errors and the result's checks are every tool's (Tool.call)."""

    def __init__(self, agent: BasicAgent, timeout: float) -> None:
        metadata = agent.metadata

        def call() -> None:  # never called: `_invoke()` runs the agent; the schema is the metadata's
            return None

        super().__init__(call, name=str(metadata["name"]), description=str(metadata["description"]), timeout=timeout)
        self.agent = agent
        self._parameters = dict(metadata["parameters"])

    @property
    def spec(self) -> ToolSpec:
        return ToolSpec(name=self.name, description=self.description, parameters=self._parameters)

    def _arguments(self, raw: JSONObject) -> Mapping[str, object] | ToolOutcome:
        return raw  # as openrappter passes them: the agent's perform() checks its own

    async def _invoke(self, kwargs: Mapping[str, object]) -> object:
        result = await self.agent.run_execute(**kwargs)
        parsed = _parsed(result)
        return parsed if parsed is not None else result


def openrappter_context(context: CallContext) -> dict[str, object]:
    """A CallContext as openrappter's agents read it (`temporal`, `query` and its older name
    `query_signals`, `memory`, `memory_echoes`, `behavioral`, `orientation`, and
    `upstream_slush` in the shape of a `data_slush`: `source_agent`, `signals`, `confidence`)."""
    temporal = context.temporal
    upstream = context.upstream_slush
    query = context.query.model_dump()
    return {
        "timestamp": temporal.iso,
        "temporal": temporal.model_dump(),
        "query": query,
        "query_signals": query,
        "memory": context.memory.model_dump(),
        "memory_echoes": [echo.model_dump() for echo in context.memory_echoes],
        "behavioral": context.behavioural.model_dump(),
        "orientation": context.orientation.model_dump(),
        **({"upstream_slush": upstream.model_dump()} if upstream else {}),
    }


def _as_dict(slush: object) -> dict[str, object]:
    if isinstance(slush, DataSlush):
        return slush.model_dump()  # openrappter's data_slush shape: source_agent, signals, ...
    if isinstance(slush, Mapping):
        return dict(slush)
    return {"value": slush}


def _query_text(kwargs: Mapping[str, object]) -> str:
    for key in ("query", "request", "user_input"):
        value = kwargs.get(key)
        if value is not None:
            return value if isinstance(value, str) else ""
    return ""


def _kwargs_of(prompt: str) -> JSONObject:
    stripped = prompt.strip()
    if stripped.startswith("{"):
        try:
            arguments = json.loads(stripped)
        except json.JSONDecodeError:
            arguments = None
        if isinstance(arguments, dict) and all(isinstance(key, str) and key.isidentifier() for key in arguments):
            return arguments
    return {"query": prompt}


def _parsed(result: object) -> object:
    if isinstance(result, str):
        try:
            return json.loads(result)
        except json.JSONDecodeError:
            return None
    return result
