"""Typed output: an LLMAgent asked for a value of a given type, checked before it is sent.

The model is given one more tool, `final_result`, whose arguments are the output's JSON
Schema (a non-object type is wrapped as `{"result": ...}`): any tool-calling model can
answer that way, where structured-output modes differ between providers. Its arguments are
validated; a value that does not validate goes back to the model with what was wrong, and
the model tries again, a bounded number of times. A valid value is sent as the reserved
`OUTPUT` document, `{"output": value}`, which `Agent.run(..., output_type=...)` reads back
into `AgentResult.output`, in-process and over HTTP alike; `Agent(LLMAgent(...)).run()`, in
process, reads it back as the LLMAgent's own `output_type` without being told.
"""

from __future__ import annotations

import json
from typing import Generic, TypeVar

from pydantic import BaseModel, TypeAdapter, ValidationError

from sentient_assist.llm.messages import ToolCallRequest, ToolSpec
from sentient_assist.protocol.json_value import JSONValue

OUTPUT_TOOL = "final_result"
_WRAPPED = "result"
_MAX_ERRORS_TOLD = 5  # validation errors told to the model in one retry

T = TypeVar("T")


class OutputSpec(Generic[T]):
    """How a value of `output_type` is asked for (a tool) and checked (its adapter)."""

    def __init__(self, output_type: type[T]) -> None:
        self.output_type = output_type
        self._adapter: TypeAdapter[T] = TypeAdapter(output_type)
        schema = self._adapter.json_schema()
        self._wrapped = not (isinstance(output_type, type) and issubclass(output_type, BaseModel))
        if self._wrapped:
            schema = {"type": "object", "properties": {_WRAPPED: schema}, "required": [_WRAPPED]}
        self.tool = ToolSpec(
            name=OUTPUT_TOOL,
            description="Give the final answer, in this structure. Call it once, when you have the answer.",
            parameters=schema,
        )

    def validate(self, arguments: str) -> T:
        """The value the model gave as `final_result`'s arguments; ValueError says what is wrong."""
        try:
            data: object = json.loads(arguments or "{}")
        except json.JSONDecodeError as exc:
            raise ValueError(f"the arguments are not JSON: {exc}") from None
        if self._wrapped:
            if not isinstance(data, dict) or _WRAPPED not in data:
                raise ValueError(f'the arguments must be an object with the field "{_WRAPPED}"')
            data = data[_WRAPPED]
        try:
            return self._adapter.validate_python(data)
        except ValidationError as exc:
            raise ValueError(_errors_for_model(exc)) from None

    def dump(self, value: T) -> JSONValue:
        """The value as JSON data, for the OUTPUT document."""
        dumped: JSONValue = self._adapter.dump_python(value, mode="json")
        return dumped


def output_call(calls: list[ToolCallRequest]) -> ToolCallRequest | None:
    """The reply's `final_result` call, if it made one (the first, if several)."""
    return next((call for call in calls if call.name == OUTPUT_TOOL), None)


def _errors_for_model(exc: ValidationError) -> str:
    errors = exc.errors(include_url=False, include_input=False)
    told = [f"{'.'.join(str(p) for p in error['loc']) or 'the value'}: {error['msg']}" for error in errors]
    more = len(told) - _MAX_ERRORS_TOLD
    return "; ".join(told[:_MAX_ERRORS_TOLD]) + (f"; and {more} more" if more > 0 else "")
