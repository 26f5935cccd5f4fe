"""ScriptedModel: a real ChatModel that plays back a script of replies. For tests, and for
trying an agent with no key and no network."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field

from sentient_assist.llm.messages import ChatMessage, ModelEvent, ReasoningDelta, TextDelta, ToolCallRequest, ToolSpec
from sentient_assist.llm.model import ModelSettings
from sentient_assist.protocol.conventions import TokenUsage
from sentient_assist.runtime.errors import ModelProviderError


@dataclass(frozen=True)
class ScriptedCall:
    name: str
    arguments: Mapping[str, object] = field(default_factory=dict)
    id: str | None = None


@dataclass(frozen=True)
class ScriptedReply:
    """One reply: reasoning, then text, then tool calls, then usage; or a failure before it all
    (`failure`), or after its text (`failure_after_text`)."""

    text: str = ""
    reasoning: str = ""
    tool_calls: tuple[ScriptedCall, ...] = ()
    usage: TokenUsage | None = None
    failure: ModelProviderError | None = None
    failure_after_text: ModelProviderError | None = None  # stream the text, then fail (a provider dying mid-answer)


class ScriptedModel:
    """Plays its replies in order, one per `stream()` call; the requests it got are kept in `calls`.
    Past the end of the script it fails, so a test sees an agent asking for more than expected."""

    def __init__(self, replies: Sequence[ScriptedReply], *, name: str = "scripted", delay: float = 0.0) -> None:
        self.name = name
        self._replies = list(replies)
        self._delay = delay
        self.calls: list[tuple[tuple[ChatMessage, ...], tuple[ToolSpec, ...], ModelSettings]] = []

    def stream(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec], settings: ModelSettings
    ) -> AsyncIterator[ModelEvent]:
        self.calls.append((tuple(messages), tuple(tools), settings))
        number = len(self.calls)
        if number > len(self._replies):
            return _fail(ModelProviderError(f"the script has {len(self._replies)} replies; this is call {number}"))
        return play(self._replies[number - 1], call_number=number, delay=self._delay)


class FunctionModel:
    """A ChatModel whose reply a function picks from the messages and tools: stateless, so one
    instance serves any number of requests at once (an offline stand-in for a real model)."""

    def __init__(
        self,
        reply: Callable[[Sequence[ChatMessage], Sequence[ToolSpec]], ScriptedReply],
        *,
        name: str = "function",
        delay: float = 0.0,
    ) -> None:
        self.name = name
        self._reply = reply
        self._delay = delay

    def stream(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec], settings: ModelSettings
    ) -> AsyncIterator[ModelEvent]:
        return play(self._reply(messages, tools), call_number=len(messages), delay=self._delay)


async def play(reply: ScriptedReply, *, call_number: int, delay: float = 0.0) -> AsyncIterator[ModelEvent]:
    """A reply as a model streams it: reasoning, text word by word, whole tool calls, usage."""
    if reply.failure is not None:
        raise reply.failure
    for piece in _pieces(reply.reasoning):
        await asyncio.sleep(delay)
        yield ReasoningDelta(piece)
    for piece in _pieces(reply.text):
        await asyncio.sleep(delay)
        yield TextDelta(piece)
    if reply.failure_after_text is not None:
        raise reply.failure_after_text
    for number, call in enumerate(reply.tool_calls):
        yield ToolCallRequest(
            id=call.id or f"call_{call_number}_{number}", name=call.name, arguments=json.dumps(call.arguments)
        )
    if reply.usage is not None:
        yield reply.usage


async def _fail(error: ModelProviderError) -> AsyncIterator[ModelEvent]:
    raise error
    yield  # pragma: no cover  (makes this an async generator)


def _pieces(text: str) -> list[str]:
    """Word by word, spaces kept, as a model streams."""
    if not text:
        return []
    words = text.split(" ")
    return [word + " " for word in words[:-1]] + [words[-1]] if words[-1] else [w + " " for w in words[:-1]]
