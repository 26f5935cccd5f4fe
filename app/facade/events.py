"""AgentEvent: one thing that happened in a run, read from the wire's naming conventions."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

EventKind = Literal[
    "text_delta",  # a piece of the answer (FINAL_RESPONSE)
    "thinking",  # a piece of reasoning (THINKING)
    "tool_call",
    "tool_result",
    "stage",
    "handoff",
    "usage",
    "ask_user",
    "error",
    "cancelled",  # the run was stopped before `done`
    "done",
    "text_block",  # an agent-named text block
    "document",  # an agent-named JSON document (or a reserved one whose payload did not fit)
    "text",  # a piece of an agent-named text stream
]


class AgentEvent(BaseModel):
    """`index` counts every event of the run densely from 0; `event_name` is the Sentient
    name it came from; `text` holds text, `data` holds JSON."""

    model_config = ConfigDict(frozen=True)

    kind: EventKind
    index: int
    event_name: str
    text: str | None = None
    data: dict[str, Any] | None = None
    id: str | None = None
    stream_id: str | None = None
