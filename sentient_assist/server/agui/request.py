"""An AG-UI `RunAgentInput` as the agent's query and session.

    messages: [system?, user, assistant, (tool...), user, ..., user]
        -> session.interactions: one per earlier user message, answered by the text of the
           assistant messages that follow it
        -> query.prompt: the last user message's text

A run that answers a pause is one of two kinds (sentient_assist/server/agui/pauses.py):

- `resume: [{interruptId, status, payload}]` answers the interrupt that ended the last run
  (ASK_USER, INTERRUPT): the prompt is the payload's text, and the last user turn the one paused.
- messages that end with tool messages answer a call of a client's tool, named by the
  assistant message before them, whose call carries the pause in its `encryptedValue`.

Everything else of the input reaches the agent in its run's `RunInput` (the face builds it:
server/agui/face.py): `state` and `context` (and the client's tools) an LLMAgent's model reads,
and any agent finds them in `response_handler.run_input`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ag_ui.core import AssistantMessage, RunAgentInput, ToolMessage, UserMessage
from ulid import ULID

from sentient_assist.protocol.request import (
    MAX_INTERACTIONS,
    MAX_PARTS,
    Query,
    SessionObject,
)
from sentient_assist.runtime.errors import InputError
from sentient_assist.runtime.pauses import PauseKind, PauseRefused, PauseSealer, Resumption, resumption_of
from sentient_assist.runtime.run_input import ToolAnswer
from sentient_assist.runtime.session import Session
from sentient_assist.server.agui.pauses import APPROVED, answer_text, pause_of
from sentient_assist.server.chat_turns import chat_history
from sentient_assist.server.history_budget import HistoryBudget

# A thread of MAX_INTERACTIONS turns, each a user message and a few of the agent's.
MAX_MESSAGES = 4 * MAX_INTERACTIONS
OMITTED = "[non-text content omitted]"  # a part of an earlier message the agent cannot read


@dataclass(frozen=True)
class AguiConversation:
    """What a run of /agui answers: the query, its session, the pause it resumes (its token
    checked), the client's tool calls it answers (by id), and where the pause came from."""

    query: Query
    session: Session
    resumed: Resumption | None
    answers: dict[str, ToolAnswer]
    pause_param: str | None


def conversation_of(
    body: RunAgentInput,
    agent_name: str,
    sealer: PauseSealer,
    budget: HistoryBudget,
    holder: str = "",
    beside: int = 0,
) -> AguiConversation:
    """The query and session an agent answers for this input; InputError naming what cannot be,
    a pause's token that `sealer` does not hold among them, or not for `holder` (this request's
    key and thread: `pause_holder`), before the agent runs. The history is counted in `budget`
    with `beside`, the bytes the run holds of the rest of the input (its state, context, tools)."""
    messages = body.messages
    if len(messages) > MAX_MESSAGES:
        raise InputError("messages", f"at most {MAX_MESSAGES} messages are read")
    last = len(messages) - 1
    turns: list[tuple[list[str], list[str]]] = []  # (the user's parts, the answers' texts)
    for index, message in enumerate(messages):
        if isinstance(message, UserMessage):
            turns.append((_parts(message.content, index, is_query=index == last), []))
        elif isinstance(message, AssistantMessage) and message.content and turns:
            turns[-1][1].append(message.content)
        # system, developer, tool, reasoning and activity messages are not a turn's text
    if not turns:
        raise InputError("messages", "no user message: a run answers the user's last message")
    if len(turns) - 1 > MAX_INTERACTIONS:
        raise InputError("messages", f"at most {MAX_INTERACTIONS} earlier user messages are read")
    pause: tuple[PauseKind, str] | None = None
    answers: dict[str, ToolAnswer] = {}
    if body.resume:
        # Answering the interrupt that ended the last run: the last user turn is the one paused.
        if len(body.resume) > 1:
            raise InputError("resume", "one interrupt is answered at a time (a run here ends with one)")
        entry = body.resume[0]
        pause = pause_of(entry.interrupt_id)
        pause_param = "resume[0].interruptId"
        if pause is None:
            raise InputError(pause_param, "not an interrupt this service made")
        prompt = answer_text(entry.payload, cancelled=entry.status == "cancelled")
        past = turns
    elif isinstance(messages[last], ToolMessage):
        # Answering a call of a client's tool: its answer resumes the run that made the call.
        pause, answers, pause_param = _client_tool_answers(body)
        prompt = APPROVED  # the call was the client's to make: it is made (llm/asking.py's approval)
        past = turns
    elif isinstance(messages[last], UserMessage):
        pause_param = None
        prompt = "\n".join(turns[-1][0])
        past = turns[:-1]
    else:
        raise InputError(f"messages[{last}].role", "the last message must be the user's, or a tool's answer")
    # The past turns kept compact (protocol/history.py): their models are built if the agent reads them.
    records: list[list[Any]] = [[parts, texts, None] for parts, texts in past]
    if pause is not None:
        records[-1][2] = list(pause)
    history = chat_history(records, agent_name)
    budget.hold(history, beside)  # in the service's ASSIST_MAX_HISTORY_BYTES_TOTAL (503 past it)
    session_object = SessionObject(processor_id=agent_name, activity_id=ULID(), request_id=ULID())
    session_object.__dict__["interactions"] = history
    session = Session(session_object)
    query = Query(id=ULID(), prompt=prompt)
    resumed = None
    if pause is not None and pause_param is not None:
        try:
            resumed = resumption_of(session, prompt, sealer, holder=holder)
        except PauseRefused as refused:
            raise InputError(pause_param, str(refused), status=refused.status) from None
    return AguiConversation(query, session, resumed, answers, pause_param)


def _client_tool_answers(body: RunAgentInput) -> tuple[tuple[PauseKind, str], dict[str, ToolAnswer], str]:
    """The pause the trailing tool messages answer (the token on the call they answer), and
    what each answered call came to."""
    messages = body.messages
    start = len(messages)
    while start > 0 and isinstance(messages[start - 1], ToolMessage):
        start -= 1
    answered: dict[str, ToolAnswer] = {}
    for index in range(start, len(messages)):
        message = messages[index]
        assert isinstance(message, ToolMessage)
        content = "\n".join(_parts(message.content, index))
        answered[message.tool_call_id] = (
            ToolAnswer(error=message.error) if message.error else ToolAnswer(result=content)
        )
    for index in range(start - 1, -1, -1):
        message = messages[index]
        if not isinstance(message, AssistantMessage) or not message.tool_calls:
            continue
        for position, call in enumerate(message.tool_calls):
            if call.id in answered and call.encrypted_value:
                param = f"messages[{index}].toolCalls[{position}].encryptedValue"
                pause = pause_of(call.encrypted_value)
                if pause is None:
                    raise InputError(param, "not a call this service made")
                return pause, answered, param
        break
    raise InputError(
        f"messages[{len(messages) - 1}]",
        "a tool message answers a call of a client's tool this agent made (the call, with its "
        "encryptedValue, in the assistant message before it); ask with a user message instead",
    )


def _parts(content: Any, index: int, *, is_query: bool = False) -> list[str]:
    """A message's text: a string, or its text parts. A part that is not text is refused in the
    query, and stands as a placeholder in the history."""
    if isinstance(content, str):
        return [content]
    if len(content) > MAX_PARTS:
        raise InputError(f"messages[{index}].content", f"at most {MAX_PARTS} parts")
    texts: list[str] = []
    for position, part in enumerate(content):
        if part.type == "text":
            texts.append(part.text)
        elif is_query:
            raise InputError(
                f"messages[{index}].content[{position}].type", "only text parts are read (the agent reads text)"
            )
        else:
            texts.append(OMITTED)
    return texts
