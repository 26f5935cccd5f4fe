"""Typed values of a finished run: what a caller reads instead of raw events."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from app.protocol.conventions import AskUserPayload, StagePayload, TokenUsage
from app.protocol.history import Message


class _Value(BaseModel):
    model_config = ConfigDict(frozen=True)


class ToolCall(_Value):
    """A tool the agent called; `id` joins the call to its result. On a completed run
    exactly one of `result` and `error` is set."""

    id: str
    name: str
    arguments: dict[str, Any] = {}
    result: Any = None
    error: str | None = None


class StageRecord(StagePayload):
    """One step of a multi-stage run (a STAGE payload): counts, never contents."""


class PendingInterrupt(AskUserPayload):
    """The run stopped to ask the user something (an ASK_USER payload); `resumable` says
    whether `token` can resume it."""


class ErrorRecord(_Value):
    """An error event the run sent (the run may have gone on after it)."""

    message: str
    code: int = 500
    details: dict[str, Any] | None = None


class AgentResult(_Value):
    """What a run produced. `messages` is the conversation so far, this turn included:
    pass it as the next call's `history`."""

    text: str = ""
    messages: tuple[Message, ...] = ()
    tool_calls: tuple[ToolCall, ...] = ()
    usage: TokenUsage = TokenUsage()  # the run's USAGE payloads, added up
    stages: tuple[StageRecord, ...] = ()
    errors: tuple[ErrorRecord, ...] = ()
    interrupt: PendingInterrupt | None = None
    cancelled: bool = False
