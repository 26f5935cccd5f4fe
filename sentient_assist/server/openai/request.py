"""The body of `POST /v1/chat/completions`, and the agent's query and session made from it.

    messages: [system?, user, assistant, user, ..., user]
        -> session.interactions: one per earlier user message, answered by the assistant
           message(s) that follow it
        -> query.prompt: the last user message

The body is read as OpenAI's API reads it, keeping only what an agent can use: the fields
a model would take (temperature, tools, max_tokens, ...) are accepted and ignored, since the
agent decides how it answers (docs/openai.md, "The request").
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidatorFunctionWrapHandler, model_validator
from ulid import ULID

from sentient_assist.protocol.history import collector_paused
from sentient_assist.protocol.request import (
    MAX_INTERACTIONS,
    MAX_NAME_LENGTH,
    MAX_PARTS,
    Query,
    SessionObject,
)
from sentient_assist.runtime.errors import InputError
from sentient_assist.runtime.pauses import PauseRefused, PauseSealer, Resumption, resumption_of
from sentient_assist.runtime.session import Session
from sentient_assist.server.chat_turns import chat_history
from sentient_assist.server.history_budget import HistoryBudget
from sentient_assist.server.openai import pauses as openai_pauses

# A chat of MAX_INTERACTIONS turns, each a user and an assistant message, and the system's.
MAX_MESSAGES = 2 * MAX_INTERACTIONS + 16
# What separates two assistant messages given in a row, as one answer.
# What stands in, in an earlier message, for a part the agent cannot read: it sees that
# something was there. Only the query's own parts are refused (a chat that once had an
# image goes on).
OMITTED = {
    "image_url": "[image omitted]",
    "input_image": "[image omitted]",
    "image": "[image omitted]",
    "input_audio": "[audio omitted]",
    "audio": "[audio omitted]",
    "file": "[file omitted]",
    "input_file": "[file omitted]",
}
OMITTED_OTHER = "[non-text content omitted]"


class ChatMessage(BaseModel):
    """One message of the chat. `content` is a string or a list of parts (text, or a placeholder
    for what is not, outside the query), checked by `conversation_of` so that an error can name
    the very part."""

    model_config = ConfigDict(extra="ignore")

    role: Literal["system", "developer", "user", "assistant"]
    content: Any = None


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="ignore")

    include_usage: bool = False


class ChatCompletionRequest(BaseModel):
    """The fields this service reads. Any other field OpenAI defines (temperature, top_p,
    max_tokens, tools, response_format, seed, user, ...) is accepted and ignored."""

    model_config = ConfigDict(
        extra="ignore",
        json_schema_extra={
            "examples": [{"model": "showcase", "messages": [{"role": "user", "content": "What can you do?"}]}]
        },
    )

    model: str = Field(max_length=MAX_NAME_LENGTH, description="The served agent's name (GET /v1/models).")
    messages: list[ChatMessage] = Field(
        min_length=1,
        max_length=MAX_MESSAGES,
        fail_fast=True,
        description="The chat so far; the last one is the user's new message.",
    )
    stream: bool | None = Field(False, description="Stream the answer as chat.completion.chunk events.")
    stream_options: StreamOptions | None = Field(None, description="`include_usage`: a last chunk with the usage.")
    n: int | None = Field(None, description="How many answers: 1 only.")

    @model_validator(mode="wrap")
    @classmethod
    def _with_the_collector_paused(cls, value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        # 20,000 messages are 20,000 models: the garbage collector waits until they are made
        # (sentient_assist/protocol/history.py, `collector_paused`). The same validation.
        with collector_paused():
            return handler(value)


def conversation_of(
    body: ChatCompletionRequest, agent_name: str, sealer: PauseSealer, budget: HistoryBudget, holder: str = ""
) -> tuple[Query, Session, Resumption | None]:
    """The query and session an agent answers for this chat; InputError names what cannot
    be, a pause's token that `sealer` (the service's) does not hold among them, or not for
    `holder` (this request's key: `pause_holder`), before the agent is started."""
    if body.n is not None and body.n != 1:
        raise InputError("n", "only one answer (n=1) is made per request")
    messages = body.messages
    query_index = len(messages) - 1
    # Only the last turn resumes, so only the last assistant message's marker can be a live
    # pause; the others' are taken out and not read (an agent that once echoed one, or a
    # pause left unanswered, does not hold up the chat).
    live_index = next((i for i in range(query_index, -1, -1) if messages[i].role == "assistant"), -1)
    pause_index = -1
    # A turn: [the parts of a user message, the texts of the assistant messages that answered
    # it (empty ones left out), the pause the last of them carried]. Lists, not objects: a chat
    # can have 10,000 turns, and these are what its History keeps.
    turns: list[list[Any]] = []
    answered = False  # the last turn has an answer: the chat does not end with a user message
    take_marker = openai_pauses.take_marker
    with collector_paused():  # a turn is a few objects, and there can be 10,000 of them
        for index, message in enumerate(messages):
            role, content = message.role, message.content
            if role == "user":
                # A string, nearly always: as _parts() reads it, without the call.
                parts = [content] if type(content) is str else _parts(content, index, is_query=index == query_index)
                turns.append([parts, [], None])
                answered = False
            elif role == "assistant":
                text, pause = take_marker(content if type(content) is str else _assistant_text(content, index))
                if turns:  # an assistant message before any user message (a greeting) answers nothing
                    live = pause if index == live_index else None
                    turn = turns[-1]
                    if text:
                        turn[1].append(text)
                    turn[2] = live
                    answered = True
                    if live is not None:
                        pause_index = index
            # system, developer: the agent has its own instructions, a chat's are not passed on
    if not turns or answered:
        raise InputError("messages", "the last message must be the user's (role 'user')")
    if len(turns) - 1 > MAX_INTERACTIONS:
        raise InputError("messages", f"at most {MAX_INTERACTIONS} earlier user messages are read")
    # The earlier turns, kept compact: their models are built if the agent reads them.
    history = chat_history(turns[:-1], agent_name)
    budget.hold(history)  # in the service's ASSIST_MAX_HISTORY_BYTES_TOTAL (503 past it)
    session_object = SessionObject(processor_id=agent_name, activity_id=ULID(), request_id=ULID())
    session_object.__dict__["interactions"] = history
    session = Session(session_object)
    query = Query(id=ULID(), prompt="\n".join(turns[-1][0]))
    if pause_index >= 0:
        # Checked here rather than by the run, so that a refused resume is a 400 naming the
        # message, streamed or not, rather than a stream's error line; the run takes it as found.
        try:
            return query, session, resumption_of(session, query.prompt, sealer, holder=holder)
        except PauseRefused as refused:
            raise InputError(f"messages[{pause_index}].content", str(refused)) from None
    return query, session, None


def _parts(content: Any, index: int, *, is_query: bool = False) -> list[str]:
    """A message's text: a string, or its text parts (each a part of the request). A part
    that is not text is refused in the query, and stands as a placeholder in the history."""
    if isinstance(content, str):
        return [content]
    if isinstance(content, list):
        if len(content) > MAX_PARTS:
            raise InputError(f"messages[{index}].content", f"at most {MAX_PARTS} parts")
        return [_part_text(part, index, position, is_query) for position, part in enumerate(content)]
    raise InputError(f"messages[{index}].content", "a message's content must be a string or a list of content parts")


def _assistant_text(content: Any, index: int) -> str:
    """An assistant message's text; no content (a message that only called tools) is none."""
    if content is None:
        return ""
    return "\n".join(_parts(content, index))


def _part_text(part: Any, index: int, position: int, is_query: bool) -> str:
    param = f"messages[{index}].content[{position}]"
    kind = part.get("type") if isinstance(part, dict) else None
    if kind in ("text", "refusal"):  # an assistant's refusal part is its text too
        text = part.get(kind)
        if isinstance(text, str):
            return text
        raise InputError(f"{param}.{kind}", f"a {kind} part needs a string `{kind}`")
    if not isinstance(kind, str):
        raise InputError(param, "a content part is an object with a `type`")
    if not is_query:
        return OMITTED.get(kind, OMITTED_OTHER)
    raise InputError(
        f"{param}.type",
        "only text parts are accepted (no images, audio or files): the agent reads text",
        code="unsupported_content",
    )
