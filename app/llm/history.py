"""The chat history a model sees, from a session (PROTOCOL.md, "History from a session")."""

from __future__ import annotations

from app.llm.messages import ChatMessage, assistant, user
from app.protocol.conventions import FINAL_RESPONSE, THINKING
from app.protocol.events import TextBlockEvent, TextChunkEvent
from app.protocol.request import Interaction


def chat_history(interactions: list[Interaction]) -> list[ChatMessage]:
    """A user message per request (its parts' prompts joined with newlines) and an assistant
    message for its answer: the FINAL_RESPONSE chunks, or else its text blocks and other text
    streams in order. Attachments are not replayed."""
    messages: list[ChatMessage] = []
    for interaction in interactions:
        messages.append(user(interaction.request.event.prompt))
        answer = assistant_text(interaction)
        if answer:
            messages.append(assistant(answer))
    return messages


def assistant_text(interaction: Interaction) -> str:
    final: list[str] = []
    other: list[str] = []
    for response in interaction.responses:
        event = response.event
        if isinstance(event, (TextChunkEvent, TextBlockEvent)) and event.event_name != THINKING:
            (final if event.event_name == FINAL_RESPONSE else other).append(event.content)
    return "".join(final) if final else "".join(other)
