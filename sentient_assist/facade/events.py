"""AgentEvent: one thing that happened in a run, read from the wire's naming conventions.

Each kind carries its own typed field; reading code needs no dict lookups for them:

| kind | field |
|---|---|
| thinking, text_delta, text_block, text | `text` |
| tool_call | `tool_call`, its `result` and `error` None |
| tool_result | `tool_call`, with `result` or `error` |
| stage | `stage` (counts, never contents) |
| handoff | `handoff` |
| usage | `usage` |
| ask_user, interrupt | `interrupt` |
| error | `error` |
| output | `output`: the value as JSON data |
| done | `result`: the whole run's AgentResult |
| document | `data`: the JSON as it came (an agent's own name, or a reserved one off its shape) |
| cancelled | nothing |
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from sentient_assist.facade.result import AgentResult, ErrorRecord, PendingInterrupt, StageRecord, ToolCall
from sentient_assist.protocol.conventions import HandoffPayload, TokenUsage

EventKind = Literal[
    "text_delta",  # a piece of the answer (FINAL_RESPONSE)
    "thinking",  # a piece of reasoning (THINKING)
    "tool_call",
    "tool_result",
    "stage",
    "handoff",
    "usage",
    "ask_user",
    "interrupt",  # the run stopped for a person's decision (INTERRUPT: approve a tool call)
    "output",  # the run's typed output (OUTPUT)
    "error",
    "cancelled",  # the run was stopped before `done`
    "done",
    "text_block",  # an agent-named text block
    "document",  # an agent-named JSON document (or a reserved one whose payload did not fit)
    "text",  # a piece of an agent-named text stream
]


class AgentEvent(BaseModel):
    """`index` counts every event of the run densely from 0; `event_name` is the Sentient
    name it came from; the field of its kind holds what it says (see the module's table)."""

    model_config = ConfigDict(frozen=True)

    kind: EventKind
    index: int
    event_name: str
    id: str | None = None
    stream_id: str | None = None
    text: str | None = None
    tool_call: ToolCall | None = None
    stage: StageRecord | None = None
    handoff: HandoffPayload | None = None
    usage: TokenUsage | None = None
    interrupt: PendingInterrupt | None = None
    error: ErrorRecord | None = None
    output: Any = None
    result: AgentResult[Any] | None = None
    data: dict[str, Any] | None = None
