"""A run's events as A2A task updates (docs/a2a.md has the table):

    text stream (chunked.text)   -> artifact updates of one artifact (id: the stream's id, name: the
                                    event name), `append` after the first, `last_chunk` on the last
    text block (atomic.textblock) -> an artifact of one text part
    JSON document (atomic.json)  -> an artifact of one data part (TOOL_CALL, STAGE, SOURCES, ...)
    ASK_USER, INTERRUPT          -> status `input-required`, its message the question, the sealed
                                    token in the message's metadata; the next message resumes it
    error (atomic.error)         -> an artifact `error` of one data part; the task fails with it
                                    (status `failed`, its message the error) unless an answer came
    done                         -> status `completed` (or `failed`, or `input-required`)

Every artifact's metadata names the event (`event_name`) and who sent it (`source`: a hand-off's
specialist sends under its own). The chunks of one stream that are ready together go as one
update: A2A's task store keeps the whole task on every update, so fewer updates are less work.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson
from a2a.helpers import new_data_part, new_text_part
from a2a.server.tasks import TaskUpdater
from a2a.types.a2a_pb2 import Part, TaskState

from sentient_assist.protocol import conventions as names
from sentient_assist.protocol.events import (
    DocumentEvent,
    DoneEvent,
    ErrorContent,
    ErrorEvent,
    ResponseEvent,
    TextBlockEvent,
    TextChunkEvent,
)
from sentient_assist.runtime.pauses import PAUSE_KINDS
from sentient_assist.server.a2a.conversation import METADATA_KEY

ERROR_ARTIFACT = "error"


class TaskAnswer:
    """Sends one run's events to its task, through the SDK's TaskUpdater; `finish()` sends the
    task's last status once the run has ended."""

    def __init__(self, updater: TaskUpdater) -> None:
        self.updater = updater
        self.answered = False  # a FINAL_RESPONSE came
        self.error: ErrorContent | None = None
        self.pause: DocumentEvent | None = None
        self.ended = False
        self._started: set[str] = set()  # the text streams with an artifact already

    async def write(self, batch: list[ResponseEvent]) -> None:
        """Send a batch of events, in order, each stream's ready chunks as one update."""
        pending: TextChunkEvent | None = None
        text: list[str] = []
        for event in batch:
            if type(event) is TextChunkEvent:
                if pending is not None and event.stream_id == pending.stream_id and not pending.is_complete:
                    text.append(event.content)
                    pending = event
                    continue
                if pending is not None:
                    await self._chunk(pending, "".join(text))
                pending, text = event, [event.content]
                continue
            if pending is not None:
                await self._chunk(pending, "".join(text))
                pending, text = None, []
            await self._one(event)
        if pending is not None:
            await self._chunk(pending, "".join(text))

    async def _chunk(self, last: TextChunkEvent, text: str) -> None:
        stream = last.stream_id
        first = stream not in self._started
        if first and not text and last.is_complete:
            return  # a stream that sent nothing: no artifact
        self._started.add(stream)
        if last.event_name == names.FINAL_RESPONSE and text:
            self.answered = True
        await self.updater.add_artifact(
            [new_text_part(text)],
            artifact_id=stream,
            name=last.event_name,
            metadata=_metadata(last.event_name, last.source),
            append=not first,
            last_chunk=last.is_complete,
        )

    async def _one(self, event: ResponseEvent) -> None:
        if type(event) is TextBlockEvent:
            if event.event_name == names.FINAL_RESPONSE and event.content:
                self.answered = True
            await self._artifact(event, new_text_part(event.content))
        elif type(event) is DocumentEvent:
            if event.event_name in PAUSE_KINDS:
                self.pause = event  # the run ends after it: the status says it at the end
                return
            await self._artifact(event, new_data_part(_plain(event.content)))
        elif type(event) is ErrorEvent:
            error: ErrorContent = event.content
            self.error = self.error or error
            content = {"error_message": error.error_message, "error_code": error.error_code, "details": error.details}
            await self.updater.add_artifact(
                [new_data_part(_plain(content))],
                artifact_id=str(event.id),
                name=ERROR_ARTIFACT,
                metadata=_metadata(ERROR_ARTIFACT, event.source),
                last_chunk=True,
            )
        elif type(event) is DoneEvent:
            self.ended = True

    async def _artifact(self, event: TextBlockEvent | DocumentEvent, part: Part) -> None:
        await self.updater.add_artifact(
            [part],
            artifact_id=str(event.id),
            name=event.event_name,
            metadata=_metadata(event.event_name, event.source),
            last_chunk=True,
        )

    async def finish(self, *, run_failed: bool = False) -> None:
        """The task's status once its run has ended: waiting for input at a pause; failed when
        the run failed (the agent raised, timed out, or the server shut down) or an error came
        with no answer; else completed."""
        updater = self.updater
        pause = self.pause
        if pause is not None:
            content = pause.content
            kind = PAUSE_KINDS[pause.event_name]
            asked = content.get("question")
            question = asked if isinstance(asked, str) else ""
            parts = [new_text_part(_question_text(kind, question, content))]
            # The pause's own payload (choices, the tool call), as the agent sent it, token apart.
            parts.append(new_data_part(_plain({k: v for k, v in content.items() if k != "token"})))
            token = content.get("token")
            metadata = {METADATA_KEY: {"pause": {"kind": kind, "token": token}}} if isinstance(token, str) else None
            message = updater.new_agent_message(parts, metadata=metadata)
            await updater.update_status(TaskState.TASK_STATE_INPUT_REQUIRED, message=message)
            return
        error = self.error
        if error is not None and (run_failed or not self.answered):
            details = {"error_code": error.error_code, **({"details": error.details} if error.details else {})}
            message = updater.new_agent_message(
                [new_text_part(error.error_message), new_data_part(_plain(details))],
                metadata={METADATA_KEY: {"error_code": error.error_code}},
            )
            await updater.failed(message)
            return
        await updater.complete()


def _question_text(kind: str, question: str, content: Mapping[str, object]) -> str:
    lines = [question] if question else []
    choices = content.get("choices")
    if isinstance(choices, list) and all(isinstance(choice, str) for choice in choices) and choices:
        lines.append("\n".join(f"- {choice}" for choice in choices))
    call = content.get("tool_call")
    if kind == "interrupt" and isinstance(call, dict) and isinstance(call.get("name"), str) and not question:
        lines.append(f"May I run {call['name']}?")
    return "\n\n".join(lines) or "The agent is waiting for your answer."


def _metadata(event_name: str, source: str) -> dict[str, Any]:
    return {"event_name": event_name, "source": source}


def _plain(content: object) -> object:
    """`content` as plain JSON (what the agent sent, as /assist would frame it)."""
    return orjson.loads(orjson.dumps(content, default=str))
