"""A past turn of a face's chat (the OpenAI, MCP, AG-UI and A2A faces), as Sentient Chat keeps it:
the user's parts as the request, the assistant's answers as one FINAL_RESPONSE, and the pause
whose token ended the turn, for the next one to resume (runtime/pauses.py reads it there).

A face reads its messages into records `(parts, answers, pause)`: the user's texts, the
assistant's texts (joined by ANSWER_SEPARATOR into one answer), and `(kind, token)` or None.
`chat_history()` keeps them compact; their models are built when the agent reads them.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

from ulid import ULID

from sentient_assist.protocol.conventions import FINAL_RESPONSE
from sentient_assist.protocol.events import DocumentEvent, TextBlockEvent
from sentient_assist.protocol.history import History, TurnReader
from sentient_assist.protocol.request import (
    AssistRequest,
    AssistRequestContent,
    AssistRequestContentPart,
    AssistRequestContentParts,
    Interaction,
    RequestMessage,
    ResponseMessage,
)
from sentient_assist.runtime.pauses import PAUSE_EVENT_NAMES

ANSWER_SEPARATOR = "\n\n"  # between two assistant messages of one turn, as one answer


def chat_interaction(
    chat_id: ULID,
    source: str,
    parts: Sequence[str],
    answers: Sequence[str],
    pause: Sequence[Any] | None,
) -> Interaction:
    """The turn of a record: its parts, its answers (one FINAL_RESPONSE, none when they are
    empty) and the pause `(kind, token)` that ended it, if one did."""
    content = AssistRequestContent(
        request_payload=AssistRequestContentParts(parts=[AssistRequestContentPart(prompt=part) for part in parts])
    )
    events: list[Any] = []
    text = ANSWER_SEPARATOR.join(answers)
    if text:
        events.append(TextBlockEvent(event_name=FINAL_RESPONSE, source=source, content=text))
    if pause is not None:
        kind, token = pause
        payload = {"question": "", "token": token, "resumable": True}
        events.append(DocumentEvent(event_name=PAUSE_EVENT_NAMES[kind], source=source, content=payload))
    return Interaction(
        request=RequestMessage(event=AssistRequest(chatId=chat_id, content=content)),
        responses=[ResponseMessage(event=event) for event in events],
    )


def _interactions_of(chat_id: ULID, source: str, records: list[Any]) -> list[Interaction]:
    return [chat_interaction(chat_id, source, *record) for record in records]


def _pause_of(record: Sequence[Any]) -> tuple[str, str] | None:
    pause = record[2]
    return None if pause is None else (PAUSE_EVENT_NAMES[pause[0]], pause[1])


# What a resume reads of a record, without building its turn.
TURN_READER = TurnReader(prompt=lambda record: "\n".join(record[0]), pause=_pause_of)


def chat_history(records: Sequence[Sequence[Any]], source: str) -> History:
    """The records `(parts, answers, pause)` as a compact history of one chat, its answers from
    `source` (the agent)."""
    return History(records, partial(_interactions_of, ULID(), source), TURN_READER)
