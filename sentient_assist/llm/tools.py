"""@tool: a Python function the model can call. Its JSON Schema comes from the signature
and docstring (pydantic); arguments are validated before the call; a bad argument or an
exception goes back to the model as the tool's error, never into the stream as a crash."""

from __future__ import annotations

import asyncio
import inspect
import json
import re
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from typing import Any, NoReturn, Protocol, cast, overload, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model
from pydantic_core import to_jsonable_python

from sentient_assist.llm.asking import Approval
from sentient_assist.llm.messages import ToolSpec
from sentient_assist.protocol.events import dumps_json
from sentient_assist.protocol.json_value import JSONObject, JSONValue
from sentient_assist.runtime.errors import ToolError
from sentient_assist.tracing import current_tracing

DEFAULT_TOOL_TIMEOUT = 30.0
_ARGS_SECTION = re.compile(r"^\s*(Args|Arguments|Parameters):\s*$", re.IGNORECASE)
_ARG_LINE = re.compile(r"^\s*(\w+)\s*(?:\([^)]*\))?\s*:\s*(.+)$")


class ToolOutcome(BaseModel):
    """What one call came to: exactly one of `result` and `error`. `error` is shown to the user
    (in TOOL_RESULT); `error_for_model`, when set, tells the model more. `for_model`, when set,
    is what the model reads of a result instead of its JSON (an MCP tool's text, say, with
    its pictures described in a line each while `result` holds them whole)."""

    model_config = ConfigDict(frozen=True)

    result: JSONValue = None
    error: str | None = None
    error_for_model: str | None = None
    for_model: str | None = None

    @property
    def model_content(self) -> str:
        """What the model reads as the tool's answer."""
        if self.error is not None:
            return "error: " + (self.error_for_model or self.error)
        if self.for_model is not None:
            return self.for_model
        return dumps_json(self.result)


class Tool:
    """A callable the model may use; build one with `@tool`."""

    def __init__(
        self,
        function: Callable[..., object],
        *,
        name: str | None = None,
        description: str | None = None,
        timeout: float = DEFAULT_TOOL_TIMEOUT,
        approval: Approval | None = None,
    ) -> None:
        self.function = function
        self.approval = approval  # with one, a call waits for a person's approval (sentient_assist/llm/asking.py)
        self.name = name or function.__name__
        summary, argument_docs = _parse_docstring(inspect.getdoc(function) or "")
        self.description = description or summary or self.name
        self.timeout = timeout
        self._arguments_model = _arguments_model(function, self.name, argument_docs)
        self._is_async = inspect.iscoroutinefunction(function)

    @property
    def spec(self) -> ToolSpec:
        schema = self._arguments_model.model_json_schema()
        schema.pop("title", None)
        return ToolSpec(name=self.name, description=self.description, parameters=schema)

    async def call(self, arguments_json: str, call_id: str | None = None) -> ToolOutcome:
        """Validate, run under the timeout, and report: a failure is the tool's error, not ours.
        With the app's tracing on, inside an `execute_tool {name}` span."""
        tracing = current_tracing()
        if tracing is None:
            return await self._call_untraced(arguments_json)
        span = tracing.start_tool(self.name, self.description, call_id)
        outcome: ToolOutcome = await tracing.run_tool(self._call_untraced(arguments_json), span, arguments_json)
        return outcome

    async def _call_untraced(self, arguments_json: str) -> ToolOutcome:
        try:
            raw = json.loads(arguments_json or "{}", parse_constant=_no_constant)
        except ValueError as exc:  # bad JSON, NaN/Infinity, or a number too long to read
            return ToolOutcome(error=f"the arguments are not valid JSON: {getattr(exc, 'msg', exc)}")
        if not isinstance(raw, dict):
            return ToolOutcome(error="the arguments must be a JSON object")
        kwargs = self._arguments(raw)
        if isinstance(kwargs, ToolOutcome):
            return kwargs
        try:
            async with asyncio.timeout(self.timeout):
                result = await self._invoke(kwargs)
        except TimeoutError:
            return ToolOutcome(error=f"the tool did not finish within {self.timeout:g} seconds")
        except (ToolError, ValueError) as exc:
            # Meant for whoever called the tool: a bad value, said in so many words.
            return ToolOutcome(error=str(exc) or type(exc).__name__)
        except Exception as exc:
            # Anything else may carry internals: the user sees its kind, the model its text.
            return ToolOutcome(
                error=f"the tool failed ({type(exc).__name__})", error_for_model=f"{type(exc).__name__}: {exc}"
            )
        if isinstance(result, ToolOutcome):
            return result  # a tool that says itself what its call came to (an MCP tool's answer)
        if result is None:
            result = "ok"  # a result is never null: null means the call failed
        try:
            result = to_jsonable_python(result)
            dumps_json(result)
        except (TypeError, ValueError):
            return ToolOutcome(error="the tool's result cannot be written as JSON (not a finite number, or too large)")
        return ToolOutcome(result=result)

    def _arguments(self, raw: JSONObject) -> Mapping[str, object] | ToolOutcome:
        """The call's keyword arguments, validated against the function's signature."""
        try:
            arguments = self._arguments_model.model_validate(raw)
        except ValidationError as exc:
            return ToolOutcome(error="invalid arguments: " + _summary(exc))
        return {name: getattr(arguments, name) for name in type(arguments).model_fields}

    async def _invoke(self, kwargs: Mapping[str, object]) -> object:
        """Run the function: a sync one in a thread, so that it cannot hold the event loop."""
        if self._is_async:
            return await cast(Awaitable[object], self.function(**kwargs))
        return await asyncio.to_thread(self.function, **kwargs)

    def __repr__(self) -> str:
        return f"Tool({self.name!r})"


@runtime_checkable
class SupportsTool(Protocol):
    """What makes a Tool of itself for an LLMAgent's `tools=`, as a BasicAgent does: so llm/
    takes one without importing the room that defines it (orchestration/ imports llm/)."""

    def as_tool(self) -> Tool: ...


class Toolset(ABC):
    """Tools known only once they are listed, as an MCP server's (sentient_assist/llm/mcp.py): an
    LLMAgent takes one in `tools=` beside functions, and lists it at its first run."""

    @property
    @abstractmethod
    def label(self) -> str:
        """How an error names it."""

    @property
    @abstractmethod
    def listed(self) -> Sequence[Tool] | None:
        """Its tools as last listed; None before the first listing."""

    @property
    @abstractmethod
    def generation(self) -> int:
        """How many times it was listed: the list may have changed when this has."""

    @abstractmethod
    async def list_tools(self) -> Sequence[Tool]:
        """List its tools (an MCP server: open its session, on first use)."""

    def known_names(self) -> frozenset[str] | None:
        """The names its tools will have, when they are known before it is listed."""
        return None

    def collides_with(self, other: Toolset) -> bool:
        """Whether its tools and `other`'s are certain to share names (one server twice, say)."""
        return False

    async def aclose(self) -> None:
        """Let go of what it holds open (an MCP server's session); the next use opens it again."""
        return None  # an optional hook, not abstract: most hold nothing


class ToolBox(Mapping[str, Tool]):
    """An LLMAgent's tools by name: its own, then, once `ready()` has listed them, its toolsets'.
    Two tools of one name are refused with both named: when the agent is built, for what is
    known then (its own tools, a toolset given twice, names a toolset's include= fixes), and
    at the listing for the rest, which then fails the run (and every run, until it changes)."""

    def __init__(
        self,
        own: Mapping[str, Tool],
        where: Mapping[str, str],
        toolsets: Sequence[tuple[str, Toolset]],
        reserved: Mapping[str, str],
    ) -> None:
        self._own = dict(own)
        self._where = dict(where)  # an own tool's name -> how errors name it ("tools[2]")
        self._toolsets = tuple(toolsets)
        self._reserved = dict(reserved)  # names the agent's own machinery takes -> what takes it
        self._all: dict[str, Tool] = dict(own)
        self._generations: tuple[int, ...] = ()
        self._check_what_is_known()

    def __getitem__(self, name: str) -> Tool:
        return self._all[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._all)

    def __len__(self) -> int:
        return len(self._all)

    @property
    def toolsets(self) -> tuple[Toolset, ...]:
        return tuple(toolset for _, toolset in self._toolsets)

    async def ready(self) -> None:
        """List the toolsets never listed yet (at once), and take in what any listing changed."""
        if not self._toolsets:
            return
        unlisted = [toolset for _, toolset in self._toolsets if toolset.listed is None]
        if unlisted:
            await asyncio.gather(*(toolset.list_tools() for toolset in unlisted))
        generations = tuple(toolset.generation for _, toolset in self._toolsets)
        if generations != self._generations:
            self._all = self._merged()
            self._generations = generations

    def _merged(self) -> dict[str, Tool]:
        merged = dict(self._own)
        owners = dict(self._where)
        for where, toolset in self._toolsets:
            for made in toolset.listed or ():
                self._refuse_clash(made.name, where, owners)
                merged[made.name] = made
                owners[made.name] = where
        return merged

    def _check_what_is_known(self) -> None:
        owners = dict(self._where)
        for number, (where, toolset) in enumerate(self._toolsets):
            for other_where, other in self._toolsets[:number]:
                if other is toolset:
                    raise ValueError(f"{other_where} and {where} are one and the same: pass it once")
                if toolset.collides_with(other):
                    raise ValueError(
                        f"{other_where} and {where} serve the same tools under the same names: the model calls "
                        "a tool by name, so give one a tool_prefix= (or split the tools with include=/exclude=)"
                    )
            for name in sorted(toolset.known_names() or ()):
                self._refuse_clash(name, where, owners)
                owners[name] = where

    def _refuse_clash(self, name: str, where: str, owners: Mapping[str, str]) -> None:
        if name in owners:
            first, second = sorted((owners[name], where), key=_position)
            raise ValueError(
                f"{first} and {second} both have a tool named {name!r}: the model calls a tool by name, "
                "so give the server a tool_prefix= (or leave the tool out with exclude=, or rename the other)"
            )
        if name in self._reserved:
            raise ValueError(
                f"{where} has a tool named {name!r}, as does {self._reserved[name]}: give the server a "
                "tool_prefix= (or leave the tool out with exclude=)"
            )


def _position(where: str) -> int:
    """The N of "tools[N] ...": clashes are told in the order of tools=."""
    digits = where[where.find("[") + 1 : where.find("]")]
    return int(digits) if digits.isdigit() else 0


def arguments_object(arguments: str) -> JSONObject:
    """A tool call's arguments as an object (for TOOL_CALL); text that is not a JSON object,
    or holds what JSON cannot carry (NaN, Infinity), is kept raw under `_raw`."""
    try:
        parsed = json.loads(arguments or "{}", parse_constant=float)
        dumps_json(parsed)  # NaN and Infinity parse, but do not travel
    except ValueError:
        return {"_raw": arguments}
    return parsed if isinstance(parsed, dict) else {"_raw": arguments}


def _no_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not a JSON number")


@overload
def tool(function: Callable[..., object], /) -> Tool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    timeout: float = DEFAULT_TOOL_TIMEOUT,
    approval: Approval | None = None,
) -> Callable[[Callable[..., object]], Tool]: ...


def tool(
    function: Callable[..., object] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    timeout: float = DEFAULT_TOOL_TIMEOUT,
    approval: Approval | None = None,
) -> Tool | Callable[[Callable[..., object]], Tool]:
    """Make a function (sync or async) a Tool: `@tool`, `@tool(timeout=5)`, or
    `@tool(approval=Approval())` for one that runs only once a person approves the call."""

    def wrap(fn: Callable[..., object]) -> Tool:
        return Tool(fn, name=name, description=description, timeout=timeout, approval=approval)

    return wrap(function) if function is not None else wrap


def _arguments_model(function: Callable[..., object], name: str, docs: dict[str, str]) -> type[BaseModel]:
    fields: dict[str, Any] = {}
    for parameter in inspect.signature(function).parameters.values():
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            raise TypeError(f"tool {name}: *args and **kwargs cannot be described to a model")
        annotation = parameter.annotation if parameter.annotation is not inspect.Parameter.empty else Any
        default = parameter.default if parameter.default is not inspect.Parameter.empty else ...
        fields[parameter.name] = (annotation, Field(default, description=docs.get(parameter.name)))
    return create_model(f"{name}_arguments", __config__=ConfigDict(extra="forbid"), **fields)


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """The summary (text before an Args: section) and each argument's description."""
    summary_lines: list[str] = []
    arguments: dict[str, str] = {}
    in_args = False
    for line in doc.splitlines():
        if _ARGS_SECTION.match(line):
            in_args = True
            continue
        if in_args:
            match = _ARG_LINE.match(line)
            if match:
                arguments[match.group(1)] = match.group(2).strip()
            elif line.strip() and not line.startswith((" ", "\t")):
                in_args = False
        if not in_args:
            summary_lines.append(line)
    return " ".join(" ".join(summary_lines).split()), arguments


def _summary(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in error['loc']) or 'arguments'}: {error['msg']}" for error in exc.errors()
    )
