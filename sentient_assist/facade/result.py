"""Typed values of a finished run: what a caller reads instead of raw events."""

from __future__ import annotations

from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict

from sentient_assist.protocol.conventions import AskUserPayload, InterruptPayload, StagePayload, TokenUsage
from sentient_assist.protocol.history import Message


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


class PendingInterrupt(_Value):
    """A run that stopped to ask a person: a question (`kind` "ask_user", with `choices` to
    offer, if any) or a decision on what it was about to do (`kind` "interrupt": `reason`,
    and the `tool_call` to approve). `resumable` is what to read before building a reply UI:
    whether `token` can resume the run."""

    kind: Literal["ask_user", "interrupt"] = "ask_user"
    question: str = ""
    choices: tuple[str, ...] = ()
    reason: str | None = None
    tool_call: ToolCall | None = None
    token: str | None = None
    resumable: bool = False

    @classmethod
    def of_ask_user(cls, payload: AskUserPayload) -> PendingInterrupt:
        return cls(
            kind="ask_user",
            question=payload.question,
            choices=tuple(payload.choices),
            token=payload.token,
            resumable=payload.resumable,
        )

    @classmethod
    def of_interrupt(cls, payload: InterruptPayload) -> PendingInterrupt:
        call = payload.tool_call
        return cls(
            kind="interrupt",
            question=payload.question,
            reason=payload.reason,
            tool_call=None if call is None else ToolCall(id=call.id, name=call.name, arguments=call.arguments),
            token=payload.token,
            resumable=payload.resumable,
        )


class ErrorRecord(_Value):
    """An error event the run sent (the run may have gone on after it)."""

    message: str
    code: int = 500
    details: dict[str, Any] | None = None


OutputT = TypeVar("OutputT")


class AgentResult(_Value, Generic[OutputT]):
    """What a run produced. `messages` is the conversation so far, this turn included:
    pass it as the next call's `history`. `output` is the run's typed output (an `OUTPUT`
    document): validated as `output_type` by `Agent.run(..., output_type=...)`, which
    returns an `AgentResult[output_type]`, or by `Agent(LLMAgent(..., output_type=...)).run()`,
    the agent's own type; else the JSON as it came, or None. `Agent.stream(...)`'s `result()`
    is the same, for the same arguments."""

    text: str = ""
    messages: tuple[Message, ...] = ()
    tool_calls: tuple[ToolCall, ...] = ()
    usage: TokenUsage = TokenUsage()  # the run's USAGE payloads, added up
    stages: tuple[StageRecord, ...] = ()
    errors: tuple[ErrorRecord, ...] = ()
    interrupt: PendingInterrupt | None = None
    cancelled: bool = False
    output: OutputT | None = None
