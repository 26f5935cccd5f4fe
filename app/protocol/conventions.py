"""The reserved event names (PROTOCOL.md, "Event naming conventions") and their payloads.

The wire has five event types; meaning travels in `event_name`. Agents that
follow these conventions (the LLM agents, orchestration) write these payloads;
the facade and the CLI read them back into typed values.
"""

from __future__ import annotations

from typing import Any, Optional

from pydantic import BaseModel, ConfigDict, model_validator

FINAL_RESPONSE = "FINAL_RESPONSE"  # text stream: the answer
THINKING = "THINKING"  # text stream: reasoning, shown apart from the answer
TOOL_CALL = "TOOL_CALL"  # json: ToolCallPayload
TOOL_RESULT = "TOOL_RESULT"  # json: ToolResultPayload
HANDOFF = "HANDOFF"  # json: HandoffPayload
STAGE = "STAGE"  # json: StagePayload
USAGE = "USAGE"  # json: UsagePayload
ASK_USER = "ASK_USER"  # json: AskUserPayload; the run stops after it


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
    error: Optional[str] = None

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
    capability: Optional[str] = None
    outcome: str
    reason: Optional[str] = None
    counts: dict[str, int] = {}


class UsagePayload(_Payload):
    """Token counts; 0 means unreported, not free."""

    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0


class AskUserPayload(_Payload):
    question: str
    token: Optional[str] = None
    resumable: bool = False
