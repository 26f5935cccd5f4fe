"""The ChatModel interface: one streamed reply per call."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Protocol

from sentient_assist.llm.messages import ChatMessage, ModelEvent, ToolSpec
from sentient_assist.runtime.capability import CapabilityConfig


@dataclass(frozen=True, slots=True)
class ModelSettings(CapabilityConfig):
    """Sampling settings; None (and no stop sequences) leaves the provider's default."""

    temperature: float | None = None
    max_tokens: int | None = None
    stop: tuple[str, ...] = ()  # sequences that end the reply where they would begin (OpenAI takes up to 4)


class ChatModel(Protocol):
    """A chat model. `stream()` yields one reply's events: text and reasoning deltas as they
    arrive, then each whole tool call, then its token counts (a TokenUsage). Failures raise
    ModelProviderError."""

    name: str

    def stream(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec], settings: ModelSettings
    ) -> AsyncIterator[ModelEvent]: ...
