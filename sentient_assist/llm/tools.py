"""@tool: a Python function the model can call. Its JSON Schema comes from the signature
and docstring (pydantic); arguments are validated before the call; a bad argument or an
exception goes back to the model as the tool's error, never into the stream as a crash."""

from __future__ import annotations

import asyncio
import inspect
import json
import re
from collections.abc import Callable
from typing import Any, overload

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model
from pydantic_core import to_jsonable_python

from sentient_assist.llm.asking import Approval
from sentient_assist.llm.messages import ToolSpec
from sentient_assist.protocol.events import dumps_json
from sentient_assist.runtime.errors import ToolError

DEFAULT_TOOL_TIMEOUT = 30.0
_ARGS_SECTION = re.compile(r"^\s*(Args|Arguments|Parameters):\s*$", re.IGNORECASE)
_ARG_LINE = re.compile(r"^\s*(\w+)\s*(?:\([^)]*\))?\s*:\s*(.+)$")


class ToolOutcome(BaseModel):
    """What one call came to: exactly one of `result` and `error`. `error` is shown to the user
    (in TOOL_RESULT); `error_for_model`, when set, tells the model more."""

    model_config = ConfigDict(frozen=True)

    result: Any = None
    error: str | None = None
    error_for_model: str | None = None

    @property
    def model_content(self) -> str:
        """What the model reads as the tool's answer."""
        if self.error is not None:
            return "error: " + (self.error_for_model or self.error)
        return dumps_json(self.result)


class Tool:
    """A callable the model may use; build one with `@tool`."""

    def __init__(
        self,
        function: Callable[..., Any],
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

    async def call(self, arguments_json: str) -> ToolOutcome:
        """Validate, run under the timeout, and report: a failure is the tool's error, not ours."""
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
        if result is None:
            result = "ok"  # a result is never null: null means the call failed
        try:
            result = to_jsonable_python(result)
            dumps_json(result)
        except (TypeError, ValueError):
            return ToolOutcome(error="the tool's result cannot be written as JSON (not a finite number, or too large)")
        return ToolOutcome(result=result)

    def _arguments(self, raw: dict[str, Any]) -> dict[str, Any] | ToolOutcome:
        """The call's keyword arguments, validated against the function's signature."""
        try:
            arguments = self._arguments_model.model_validate(raw)
        except ValidationError as exc:
            return ToolOutcome(error="invalid arguments: " + _summary(exc))
        return {name: getattr(arguments, name) for name in type(arguments).model_fields}

    async def _invoke(self, kwargs: dict[str, Any]) -> Any:
        """Run the function: a sync one in a thread, so that it cannot hold the event loop."""
        if self._is_async:
            return await self.function(**kwargs)
        return await asyncio.to_thread(self.function, **kwargs)

    def __repr__(self) -> str:
        return f"Tool({self.name!r})"


def arguments_object(arguments: str) -> dict[str, Any]:
    """A tool call's arguments as an object (for TOOL_CALL); text that is not a JSON object,
    or holds what JSON cannot carry (NaN, Infinity), is kept raw under `_raw`."""
    try:
        parsed = json.loads(arguments or "{}", parse_constant=float)
        dumps_json(parsed)  # NaN and Infinity parse, but do not travel
    except ValueError:
        return {"_raw": arguments}
    return parsed if isinstance(parsed, dict) else {"_raw": arguments}


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


@overload
def tool(function: Callable[..., Any], /) -> Tool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    timeout: float = DEFAULT_TOOL_TIMEOUT,
    approval: Approval | None = None,
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    function: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    timeout: float = DEFAULT_TOOL_TIMEOUT,
    approval: Approval | None = None,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Make a function (sync or async) a Tool: `@tool`, `@tool(timeout=5)`, or
    `@tool(approval=Approval())` for one that runs only once a person approves the call."""

    def wrap(fn: Callable[..., Any]) -> Tool:
        return Tool(fn, name=name, description=description, timeout=timeout, approval=approval)

    return wrap(function) if function is not None else wrap


def _arguments_model(function: Callable[..., Any], name: str, docs: dict[str, str]) -> type[BaseModel]:
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
