"""A conversation as the wire knows it: Message, and the conversions between a session's
interactions and messages (docs/protocol.md, "A turn of history"). No I/O.

The facade sends messages as a session's interactions; agents (LLM agents, orchestration)
read a session's interactions back as messages.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict
from ulid import ULID

from sentient_assist.protocol.conventions import FINAL_RESPONSE, THINKING
from sentient_assist.protocol.events import DoneEvent, ResponseEventAdapter, TextBlockEvent, TextChunkEvent
from sentient_assist.protocol.request import (
    AssistRequest,
    AssistRequestContent,
    AssistRequestContentPart,
    AssistRequestContentParts,
    Interaction,
    RequestMessage,
    ResponseMessage,
)


class Message(BaseModel):
    """One turn of a conversation. An assistant turn keeps the wire events it was made of,
    so that history sent back is what Sentient Chat would send."""

    model_config = ConfigDict(frozen=True)

    role: Literal["user", "assistant"]
    content: str
    events: tuple[dict[str, Any], ...] = ()


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


def messages_from(interactions: Iterable[Interaction], *, keep_events: bool = True) -> tuple[Message, ...]:
    """A session's interactions as messages: the inverse of interactions_from(). Without
    `keep_events` an answer is its text only: all a model's chat history needs, for far less work."""
    messages: list[Message] = []
    for interaction in interactions:
        messages.append(Message(role="user", content=user_text(interaction)))
        if interaction.responses:
            events = ()
            if keep_events:
                events = tuple(ResponseEventAdapter.dump_python(r.event, mode="json") for r in interaction.responses)
            messages.append(Message(role="assistant", content=assistant_text(interaction), events=events))
    return tuple(messages)


def as_messages(history: Iterable[Message | dict[str, Any]]) -> tuple[Message, ...]:
    """Messages, or dicts shaped like them (`{"role": "user", "content": "hi"}`)."""
    return tuple(item if isinstance(item, Message) else Message.model_validate(item) for item in history)


def interactions_from(messages: tuple[Message, ...], chat_id: ULID, source: str) -> list[Interaction]:
    """One interaction per user message, answered by the assistant message that follows it."""
    interactions: list[Interaction] = []
    for position, message in enumerate(messages):
        if message.role == "user":
            interactions.append(Interaction(request=RequestMessage(event=_request(message.content, chat_id))))
        elif not interactions or interactions[-1].responses:
            raise ValueError(f"history[{position}]: an assistant message must follow a user message")
        else:
            events = message.events or _events_for_text(message.content, source)
            interactions[-1].responses = [
                ResponseMessage(event=ResponseEventAdapter.validate_python(event)) for event in events
            ]
    return interactions


def _request(prompt: str, chat_id: ULID) -> AssistRequest:
    part = AssistRequestContentPart(prompt=prompt, fileIds=[])
    content = AssistRequestContent(request_payload=AssistRequestContentParts(parts=[part]))
    return AssistRequest(id=ULID(), chatId=chat_id, content=content)


def _events_for_text(text: str, source: str) -> list[dict[str, Any]]:
    """An assistant message written by hand: its text as the answer stream it would have been."""
    answer = TextChunkEvent(
        event_name=FINAL_RESPONSE, source=source, stream_id=str(ULID()), is_complete=False, content=text
    )
    events = (answer, answer.closing_chunk(), DoneEvent(source=source))
    return [ResponseEventAdapter.dump_python(event, mode="json") for event in events]
