"""What goes to a chat model (messages) and what comes back from it (stream events)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Union


@dataclass(frozen=True, slots=True)
class ToolCallRequest:
    """A whole tool call, reassembled from the model's deltas; `arguments` is its raw JSON text."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class ChatMessage:
    """One message of the conversation sent to the model."""

    role: Literal["system", "user", "assistant", "tool"]
    content: str = ""
    tool_calls: tuple[ToolCallRequest, ...] = ()  # assistant
    tool_call_id: str = ""  # tool
    name: str = ""  # tool


def system(content: str) -> ChatMessage:
    return ChatMessage("system", content)


def user(content: str) -> ChatMessage:
    return ChatMessage("user", content)


def assistant(content: str, tool_calls: tuple[ToolCallRequest, ...] = ()) -> ChatMessage:
    return ChatMessage("assistant", content, tool_calls=tool_calls)


def tool_result(call: ToolCallRequest, content: str) -> ChatMessage:
    return ChatMessage("tool", content, tool_call_id=call.id, name=call.name)


# What a model streams for one reply.


@dataclass(frozen=True, slots=True)
class TextDelta:
    text: str


@dataclass(frozen=True, slots=True)
class ReasoningDelta:
    text: str


@dataclass(frozen=True, slots=True)
class ModelUsage:
    """Token counts of one reply; 0 means unreported."""

    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0


class UsageTally:
    """A run's token counts, summed over its model replies, as the USAGE event carries them."""

    __slots__ = ("requests", "input_tokens", "output_tokens", "total_tokens")

    def __init__(self) -> None:
        self.requests = self.input_tokens = self.output_tokens = self.total_tokens = 0

    def add(self, usage: ModelUsage) -> None:
        self.input_tokens += usage.input_tokens
        self.output_tokens += usage.output_tokens
        self.total_tokens += usage.total_tokens or (usage.input_tokens + usage.output_tokens)

    def payload(self) -> dict[str, int]:
        return {
            "requests": self.requests,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "total_tokens": self.total_tokens,
        }


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool as the model sees it: name, description, JSON Schema of its arguments."""

    name: str
    description: str
    parameters: dict = field(default_factory=dict)


ModelEvent = Union[TextDelta, ReasoningDelta, ToolCallRequest, ModelUsage]
