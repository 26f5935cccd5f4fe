"""An LLMAgent that can ask the person: the ask_user tool, and the run it pauses and resumes.

    LLMAgent(model=..., ask_user=AskUser())

With `AskUser`, the model has one more tool, `ask_user(question, choices)`. When it calls it,
the run's other calls of that reply run, and the run pauses: `ASK_USER` with the question and
a token, then `done`. The token carries the run's conversation since the user's prompt (the
model's calls and the tools' results), signed (sentient_assist/runtime/pauses.py). The person's answer,
the next request, resumes the same tool loop with the answer as the `ask_user` call's result:
not a fresh conversation. A pause is answered once (sentient_assist/runtime/pauses.py): an
approval replayed is refused before the agent runs, so an approved tool never runs twice.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from sentient_assist.llm.messages import ChatMessage, ToolCallRequest, ToolSpec
from sentient_assist.protocol.json_value import JSONObject
from sentient_assist.runtime.capability import CapabilityConfig

ASK_TOOL = "ask_user"
APPROVING = frozenset({"yes", "y", "ok", "okay", "approve", "approved", "allow", "go ahead", "sure"})
REFUSED = "the user refused this call"


@dataclass(frozen=True)
class Approval(CapabilityConfig):
    """A tool that runs only once a person approves the call: the run stops with an INTERRUPT
    naming the tool and its arguments; "yes" (or "approve", "ok", ...) runs it, anything else
    refuses it, and the model is told so."""

    question: str = ""  # shown to the person; empty: "Run <tool>(<arguments>)?"


def approves(answer: str) -> bool:
    return answer.strip().strip(".!").lower() in APPROVING


@dataclass(frozen=True)
class AskUser(CapabilityConfig):
    """Lets the model ask the person a question; the run pauses until they answer."""

    description: str = (
        "Ask the user a question when you cannot go on without their answer (a choice, a missing "
        "detail, a confirmation). The conversation pauses until they answer."
    )

    @property
    def tool(self) -> ToolSpec:
        return ToolSpec(
            name=ASK_TOOL,
            description=self.description,
            parameters={
                "type": "object",
                "properties": {
                    "question": {"type": "string", "description": "What to ask, in one or two sentences."},
                    "choices": {
                        "type": "array",
                        "items": {"type": "string"},
                        "description": "Answers to offer, when there are a few.",
                    },
                },
                "required": ["question"],
            },
        )


@dataclass(frozen=True)
class Question:
    """What an ask_user call asks."""

    call: ToolCallRequest
    question: str
    choices: tuple[str, ...]

    @classmethod
    def of(cls, call: ToolCallRequest) -> Question:
        try:
            arguments = json.loads(call.arguments or "{}")
        except json.JSONDecodeError:
            arguments = {}
        if not isinstance(arguments, dict):
            arguments = {}
        question = arguments.get("question")
        choices = arguments.get("choices")
        return cls(
            call=call,
            question=question if isinstance(question, str) and question.strip() else "Could you tell me more?",
            choices=tuple(c for c in choices if isinstance(c, str)) if isinstance(choices, list) else (),
        )


@dataclass(frozen=True)
class Paused:
    """A paused LLM run as its token keeps it: its messages since the user's prompt, and the
    call it stopped at (an ask_user call, or a call waiting for approval)."""

    messages: list[ChatMessage]
    call: ToolCallRequest
    approval: bool

    def state(self) -> JSONObject:
        return {
            "messages": [_dumped(message) for message in self.messages],
            "call": _dumped_call(self.call),
            "approval": self.approval,
        }

    @classmethod
    def of(cls, state: object) -> Paused | None:
        """A pause's state back; None if it is not one of ours."""
        if not isinstance(state, dict) or not isinstance(state.get("messages"), list):
            return None
        try:
            messages = [_loaded(message) for message in state["messages"]]
            call = ToolCallRequest(**state["call"])
        except (TypeError, KeyError, ValueError):
            return None
        return cls(messages, call, state.get("approval") is True)


def _dumped_call(call: ToolCallRequest) -> JSONObject:
    return {"id": call.id, "name": call.name, "arguments": call.arguments}


def _dumped(message: ChatMessage) -> JSONObject:
    return {
        "role": message.role,
        "content": message.content,
        "tool_calls": [_dumped_call(call) for call in message.tool_calls],
        "tool_call_id": message.tool_call_id,
        "name": message.name,
    }


def _loaded(data: dict[str, Any]) -> ChatMessage:
    if data["role"] not in ("system", "user", "assistant", "tool"):
        raise ValueError(f"not a role: {data['role']!r}")
    return ChatMessage(
        role=data["role"],
        content=str(data["content"]),
        tool_calls=tuple(ToolCallRequest(**call) for call in data["tool_calls"]),
        tool_call_id=str(data["tool_call_id"]),
        name=str(data["name"]),
    )
