"""A host with two specialists: the showcase agent, and the assistant (time and arithmetic).

With MODEL_NAME set, a language model hosts and the assistant is a language model too.
Without it, it runs offline: stand-in models (FunctionModel) pick a specialist by simple
rules, so every part of a hand-off can be watched with no key and no network:

    assist chat --agent concierge           # try: "what is 12 * 7?", "show me events", "hello"
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from sentient_assist import HostAgent, LLMAgent, OpenAIChatModel, Specialist, load_settings
from sentient_assist.llm import ChatMessage, ChatModel, ToolSpec
from sentient_assist.testing import FunctionModel, ScriptedCall, ScriptedReply

from .assistant import agent as live_assistant
from .assistant import calculate, current_time
from .showcase import ShowcaseAgent

# Possessive, and only over the prompt's start: linear on any input.
_ARITHMETIC = re.compile(r"(?<![\d.])[\d.]++(?:\s*+(?:\*\*|//|[-+*/%])\s*+[\d.]++)+")
_LOOK_AT = 2000
_GREETING = re.compile(r"^\s*(hi|hello|hey)\b", re.IGNORECASE)


def _offline_host(messages: Sequence[ChatMessage], tools: Sequence[ToolSpec]) -> ScriptedReply:
    last = messages[-1]
    if last.role != "user" or not tools:
        return ScriptedReply(text="I will answer this one myself: ask me about numbers, the time, or events.")
    prompt = last.content
    if _GREETING.match(prompt):
        return ScriptedReply(text="Hello! I hand questions to specialists: try arithmetic, the time, or events.")
    if _ARITHMETIC.search(prompt[:_LOOK_AT]) or "time" in prompt[:_LOOK_AT].lower():
        return ScriptedReply(
            text="Let me ask the assistant.",
            tool_calls=(ScriptedCall("assistant", {"reason": "arithmetic and time are its tools"}),),
        )
    return ScriptedReply(
        text="The showcase agent can show you that.",
        tool_calls=(ScriptedCall("showcase", {"reason": "it shows every event type"}),),
    )


def _offline_assistant(messages: Sequence[ChatMessage], tools: Sequence[ToolSpec]) -> ScriptedReply:
    last = messages[-1]
    if last.role == "tool":
        return ScriptedReply(text=f"The {last.name} tool says: {last.content}")
    expression = _ARITHMETIC.search(last.content[:_LOOK_AT])
    if expression:
        return ScriptedReply(tool_calls=(ScriptedCall("calculate", {"expression": expression.group()}),))
    return ScriptedReply(tool_calls=(ScriptedCall("current_time", {"time_zone": "UTC"}),))


def agent() -> HostAgent:
    settings = load_settings()
    host_model: ChatModel
    if settings.model_name:
        host_model = OpenAIChatModel.from_settings(settings)
        assistant = live_assistant()
    else:
        host_model = FunctionModel(_offline_host, name="offline-host")
        assistant = LLMAgent(
            name="assistant",
            model=FunctionModel(_offline_assistant, name="offline-assistant"),
            tools=[current_time, calculate],
        )
    return HostAgent(
        name="concierge",
        description="A host that hands questions to the showcase agent or the assistant.",
        model=host_model,
        specialists=[
            Specialist(ShowcaseAgent(), "shows every Sentient event type: plans, sources, streamed answers"),
            Specialist(assistant, "arithmetic and the current time in any time zone"),
        ],
        fallback="showcase",
    )
