"""What goes to a chat model (messages) and what comes back from it (stream events)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from sentient_assist.protocol.conventions import TokenUsage
from sentient_assist.protocol.history import Message


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


def chat_history(conversation: Iterable[Message]) -> list[ChatMessage]:
    """The conversation as the model reads it: each turn's text; an answer that said nothing is left out."""
    return [ChatMessage(m.role, m.content) for m in conversation if m.role == "user" or m.content]


# What a model streams for one reply.


@dataclass(frozen=True, slots=True)
class TextDelta:
    text: str


@dataclass(frozen=True, slots=True)
class ReasoningDelta:
    text: str


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool as the model sees it: name, description, JSON Schema of its arguments."""

    name: str
    description: str
    parameters: dict[str, Any] = field(default_factory=dict)


# A reply's usage is a TokenUsage of its token counts (`requests` is counted by whoever asked).
ModelEvent = TextDelta | ReasoningDelta | ToolCallRequest | TokenUsage
