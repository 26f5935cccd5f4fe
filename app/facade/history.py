"""History as messages, and as the session interactions Sentient Chat would send for it."""

from __future__ import annotations

from typing import Any, Iterable

from ulid import ULID

from app.facade.result import Message
from app.protocol import conventions as names
from app.protocol.events import DoneEvent, ResponseEventAdapter, TextChunkEvent
from app.protocol.history import assistant_text, user_text
from app.protocol.request import (
    AssistRequest,
    AssistRequestContent,
    AssistRequestContentPart,
    AssistRequestContentParts,
    Interaction,
    RequestMessage,
    ResponseMessage,
)


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
    part = AssistRequestContentPart(prompt=prompt, files_ids=[])
    content = AssistRequestContent(request_payload=AssistRequestContentParts(parts=[part]))
    return AssistRequest(id=ULID(), chat_id=chat_id, content=content)


def _events_for_text(text: str, source: str) -> list[dict[str, Any]]:
    """An assistant message written by hand: its text as the answer stream it would have been."""
    stream_id = str(ULID())
    events = [
        TextChunkEvent(event_name=names.FINAL_RESPONSE, source=source, stream_id=stream_id, is_complete=False, content=text),
        TextChunkEvent(event_name=names.FINAL_RESPONSE, source=source, stream_id=stream_id, is_complete=True, content=""),
        DoneEvent(source=source),
    ]
    return [ResponseEventAdapter.dump_python(event, mode="json") for event in events]


def messages_from(interactions: Iterable[Interaction]) -> tuple[Message, ...]:
    """A session's interactions as messages: the inverse of interactions_from()."""
    messages: list[Message] = []
    for interaction in interactions:
        messages.append(Message(role="user", content=user_text(interaction)))
        if interaction.responses:
            events = tuple(ResponseEventAdapter.dump_python(r.event, mode="json") for r in interaction.responses)
            messages.append(Message(role="assistant", content=assistant_text(interaction), events=events))
    return tuple(messages)
