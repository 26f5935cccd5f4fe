"""The chat history a model sees, from a session."""

from __future__ import annotations

from app.llm.messages import ChatMessage, assistant, user
from app.protocol.history import assistant_text, user_text
from app.protocol.request import Interaction


def chat_history(interactions: list[Interaction]) -> list[ChatMessage]:
    """A user message per request and an assistant message for its answer, if it had one."""
    messages: list[ChatMessage] = []
    for interaction in interactions:
        messages.append(user(user_text(interaction)))
        answer = assistant_text(interaction)
        if answer:
            messages.append(assistant(answer))
    return messages
