"""A task's messages as the agent's session: each user message a turn, the agent's messages of
that turn its answer, and the pause the task waits at (its status message's token) the last
turn's, for the next message to resume.

A2A keeps a conversation in its task (`Task.history`, then `Task.status.message`), on whichever
replica's store holds it: the session is rebuilt from it for every message, as /assist rebuilds
one from the history a request carries. A pause is bound to the digest of the conversation's
prompts, so the prompts are read back exactly as they were sent.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from a2a.helpers import get_artifact_text, get_message_text
from a2a.types.a2a_pb2 import Message, Role, Task
from google.protobuf.json_format import MessageToDict
from ulid import ULID

from sentient_assist.protocol import conventions as names
from sentient_assist.protocol.history import History
from sentient_assist.protocol.request import (
    MAX_INTERACTIONS,
    SessionObject,
)
from sentient_assist.runtime.errors import InputError
from sentient_assist.runtime.pauses import PAUSE_EVENT_NAMES, PauseKind
from sentient_assist.runtime.session import Session
from sentient_assist.server.chat_turns import chat_history

# Where a message of ours keeps what A2A has no field for: a pause's kind and sealed token.
METADATA_KEY = "sentient_assist"


def prompt_of(message: Message | None) -> str:
    """The text of a user message: its text parts, joined with newlines."""
    if message is None:
        raise InputError("message", "required")
    text = get_message_text(message)
    if not text and not any(part.HasField("data") for part in message.parts):
        raise InputError("message.parts", "a text part is required (what to ask the agent)")
    if not text:
        # A data part alone: its JSON is the prompt, as an agent reads a structured request.
        text = "\n".join(_json(MessageToDict(part)["data"]) for part in message.parts if part.HasField("data"))
    return text


def pause_of(message: Message) -> tuple[PauseKind, str] | None:
    """The pause an agent message of ours carries (its kind and sealed token), if any."""
    if METADATA_KEY not in message.metadata.fields:
        return None
    ours = MessageToDict(message.metadata).get(METADATA_KEY)
    pause = ours.get("pause") if isinstance(ours, dict) else None
    if not isinstance(pause, dict):
        return None
    kind, token = pause.get("kind"), pause.get("token")
    if kind not in PAUSE_EVENT_NAMES or not isinstance(token, str) or not token:
        return None
    return kind, token


def session_of(
    task: Task | None,
    agent_name: str,
    earlier: Sequence[Task] = (),
    *,
    max_bytes: int | None = None,
    hold: Callable[[History], None] | None = None,
) -> Session:
    """The session of a task's next message: the turns of the context's `earlier` tasks (each
    answered by its FINAL_RESPONSE artifacts), then the task's own, the last one holding the
    pause the task waits at, if it waits at one. Its text is at most `max_bytes` (the body
    limit: what an /assist request's history could hold), else InputError. Its history
    is given to `hold` (the service's `HistoryBudget.hold`, which may refuse it)."""
    turns: list[tuple[str, list[str]]] = []
    for done in earlier:
        _read_turns(done, turns)
        answer = [get_artifact_text(a, "") for a in done.artifacts if a.name == names.FINAL_RESPONSE]
        if turns and any(answer):
            turns[-1][1].append("".join(answer))
    if task is not None:
        _read_turns(task, turns)
    if not turns:
        return Session.new(agent_name)
    if len(turns) >= MAX_INTERACTIONS:
        raise InputError("message.task_id", f"the task has {len(turns)} turns, the most one task takes")
    if max_bytes is not None:
        size = sum(len(prompt) + sum(len(answer) for answer in answers) for prompt, answers in turns)
        if size > max_bytes:
            raise InputError(
                "message.contextId",
                f"the conversation so far (this task and its context's earlier ones) holds "
                f"{size} characters, more than ASSIST_MAX_BODY_BYTES ({max_bytes}): start a new context",
            )
    pause = pause_of(task.status.message) if task is not None and task.status.HasField("message") else None
    # Kept compact, as the other faces' histories are: the turns' models are built if the agent
    # reads them, and the service counts what it holds (ASSIST_MAX_HISTORY_BYTES_TOTAL).
    last = len(turns) - 1
    records = [([prompt], answers, pause if index == last else None) for index, (prompt, answers) in enumerate(turns)]
    session_object = SessionObject(processor_id=agent_name, activity_id=ULID(), request_id=ULID())
    history = chat_history(records, agent_name)
    if hold is not None:
        hold(history)
    session_object.__dict__["interactions"] = history
    return Session(session_object)


def _read_turns(task: Task, turns: list[tuple[str, list[str]]]) -> None:
    """A task's messages as turns: each user message one, the agent's messages its answer."""
    for message in task.history:
        if message.role == Role.ROLE_USER:
            turns.append((prompt_of(message), []))
        elif turns:
            text = get_message_text(message)
            if text:
                turns[-1][1].append(text)


def earlier_of(task: Task) -> list[str]:
    """The ids of the earlier tasks of its context whose turns a task's conversation holds (kept
    in its metadata when it was made: the conversation a pause's token is bound to stays one)."""
    if METADATA_KEY not in task.metadata.fields:
        return []
    ours = MessageToDict(task.metadata).get(METADATA_KEY)
    ids = ours.get("earlier") if isinstance(ours, dict) else None
    return [i for i in ids if isinstance(i, str)] if isinstance(ids, list) else []


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
