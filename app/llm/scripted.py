"""ScriptedModel: a real ChatModel that plays back a script of replies. For tests, and for
trying an agent with no key and no network."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Optional, Sequence

from app.llm.messages import (
    ChatMessage,
    ModelEvent,
    ModelUsage,
    ReasoningDelta,
    TextDelta,
    ToolCallRequest,
    ToolSpec,
)
from app.llm.model import ModelSettings
from app.runtime.errors import ModelProviderError


@dataclass(frozen=True)
class ScriptedCall:
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    id: Optional[str] = None


@dataclass(frozen=True)
class ScriptedReply:
    """One reply: reasoning, then text, then tool calls, then usage; or a failure."""

    text: str = ""
    reasoning: str = ""
    tool_calls: tuple[ScriptedCall, ...] = ()
    usage: Optional[ModelUsage] = None
    failure: Optional[ModelProviderError] = None
    fail_after_text: bool = False  # stream the text, then fail (a provider dying mid-answer)


class ScriptedModel:
    """Plays its replies in order, one per `stream()` call; the requests it got are kept in `calls`.
    Past the end of the script it fails, so a test sees an agent asking for more than expected."""

    def __init__(self, replies: Sequence[ScriptedReply], *, name: str = "scripted", delay: float = 0.0) -> None:
        self.name = name
        self._replies = list(replies)
        self._delay = delay
        self.calls: list[tuple[tuple[ChatMessage, ...], tuple[ToolSpec, ...], ModelSettings]] = []

    async def stream(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec], settings: ModelSettings
    ) -> AsyncIterator[ModelEvent]:
        self.calls.append((tuple(messages), tuple(tools), settings))
        if len(self.calls) > len(self._replies):
            raise ModelProviderError(f"the script has {len(self._replies)} replies; this is call {len(self.calls)}")
        reply = self._replies[len(self.calls) - 1]
        if reply.failure is not None and not reply.fail_after_text:
            raise reply.failure
        for piece in _pieces(reply.reasoning):
            await self._pause()
            yield ReasoningDelta(piece)
        for piece in _pieces(reply.text):
            await self._pause()
            yield TextDelta(piece)
        if reply.failure is not None:
            raise reply.failure
        for number, call in enumerate(reply.tool_calls):
            yield ToolCallRequest(id=call.id or f"call_{len(self.calls)}_{number}", name=call.name,
                                  arguments=json.dumps(call.arguments))
        if reply.usage is not None:
            yield reply.usage

    async def _pause(self) -> None:
        if self._delay:
            await asyncio.sleep(self._delay)


def _pieces(text: str) -> list[str]:
    """Word by word, spaces kept, as a model streams."""
    if not text:
        return []
    words = text.split(" ")
    return [word + " " for word in words[:-1]] + [words[-1]] if words[-1] else [w + " " for w in words[:-1]]
