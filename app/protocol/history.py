"""Reading a turn of history (PROTOCOL.md, "History from a session")."""

from __future__ import annotations

from app.protocol.conventions import FINAL_RESPONSE, THINKING
from app.protocol.events import TextBlockEvent, TextChunkEvent
from app.protocol.request import Interaction


def user_text(interaction: Interaction) -> str:
    """The prompts of the request's parts, joined with newlines (attachments are not replayed)."""
    return interaction.request.event.prompt


def assistant_text(interaction: Interaction) -> str:
    """The FINAL_RESPONSE content of the answer; when there is none, its text blocks and
    other text streams in order (THINKING never counts)."""
    final: list[str] = []
    other: list[str] = []
    for response in interaction.responses:
        event = response.event
        if isinstance(event, (TextChunkEvent, TextBlockEvent)) and event.event_name != THINKING:
            (final if event.event_name == FINAL_RESPONSE else other).append(event.content)
    return "".join(final) if final else "".join(other)
