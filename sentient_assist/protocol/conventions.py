"""The reserved event names (docs/protocol.md, "Reserved event names") and their payloads.

The wire has five event types; meaning travels in `event_name`. Agents that
follow these conventions (the LLM agents, orchestration) write these payloads;
the facade and the CLI read them back into typed values.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

FINAL_RESPONSE = "FINAL_RESPONSE"  # text stream: the answer
THINKING = "THINKING"  # text stream: reasoning, shown apart from the answer
TOOL_CALL = "TOOL_CALL"  # json: ToolCallPayload
TOOL_RESULT = "TOOL_RESULT"  # json: ToolResultPayload
HANDOFF = "HANDOFF"  # json: HandoffPayload
STAGE = "STAGE"  # json: StagePayload
USAGE = "USAGE"  # json: TokenUsage
ASK_USER = "ASK_USER"  # json: AskUserPayload; the run stops after it
OUTPUT = "OUTPUT"  # json: OutputPayload: the run's typed output, validated by the agent
INTERRUPT = "INTERRUPT"  # json: InterruptPayload: a person must decide (approve a tool call); the run stops after it


class _Payload(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")


class ToolCallPayload(_Payload):
    id: str
    name: str
    arguments: dict[str, Any]


class ToolResultPayload(_Payload):
    id: str
    name: str
    result: Any = None
    error: str | None = None

    @model_validator(mode="after")
    def _one_of_result_or_error(self) -> ToolResultPayload:
        if self.error is not None and self.result is not None:
            raise ValueError("a tool result has a result or an error, not both")
        return self


class HandoffPayload(_Payload):
    to_agent: str
    argument: dict[str, Any]


class StagePayload(_Payload):
    stage: str
    phase: str
    capability: str | None = None
    outcome: str
    reason: str | None = None
    counts: dict[str, int] = {}


class TokenUsage(_Payload):
    """Token counts: of one model reply, or summed over a run with `+` (the USAGE payload).
    0 means unreported, not free; a total reported as 0 is the input and output added up."""

    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = Field(default=0, validate_default=True)

    @field_validator("total_tokens")
    @classmethod
    def _input_plus_output_when_unreported(cls, total: int, info: ValidationInfo) -> int:
        # Some providers report input and output but no total.
        return total or info.data.get("input_tokens", 0) + info.data.get("output_tokens", 0)

    def __add__(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(
            requests=self.requests + other.requests,
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            total_tokens=self.total_tokens + other.total_tokens,
        )


class AskUserPayload(_Payload):
    """A question for the person; `choices`, when given, are the answers to offer."""

    question: str
    choices: list[str] = []
    token: str | None = None
    resumable: bool = False


class OutputPayload(_Payload):
    """A run's typed output (`LLMAgent(output_type=...)`), as JSON: any value, under "output"."""

    output: Any


class InterruptPayload(_Payload):
    """A run stopped for a person's decision on what it was about to do: `reason` says what
    kind ("approval"), `tool_call` names the tool and its arguments."""

    reason: str
    question: str = ""
    tool_call: ToolCallPayload | None = None
    token: str | None = None
    resumable: bool = False
