"""The served agent as one MCP tool: its definition, a call's arguments as the agent's query and
session, and the run's events read into the call's result.

    arguments {prompt, history?, resume_token?} -> Query (the prompt) and Session (the history,
        or the paused conversation the token carries)
    the run's events -> ToolAnswer -> CallToolResult:
        content            the answer's text (FINAL_RESPONSE; else the other text, as a turn of
                           history reads it), then a pause's question, or the error
        structuredContent  {"documents": [{"name", "content"}, ...], "pause"?, "error"?}
        isError            the run sent an `error` event (the agent failed, timed out, was refused)
    and, for the progress notifications, a short note per event (`ToolAnswer.read`).

A pause (ASK_USER, INTERRUPT) ends the call with the question and a `resume_token`; the next
call answers it with `prompt` = the answer and that `resume_token`. The token is the pause's
sealed token (sentient_assist/runtime/pauses.py) and the prompts of the conversation it was
made in, which the sealed token is bound to: the call that answers needs nothing else, and
a token whose prompts were changed is refused as any token of another conversation is.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Mapping
from typing import Any

import mcp_types as types
import orjson
from ulid import ULID

from sentient_assist.protocol import conventions as names
from sentient_assist.protocol.events import (
    DocumentEvent,
    DoneEvent,
    ErrorContent,
    ErrorEvent,
    ResponseEvent,
    TextBlockEvent,
    TextChunkEvent,
    dumps_json,
)
from sentient_assist.protocol.json_value import JSONObject
from sentient_assist.protocol.request import (
    MAX_INTERACTIONS,
    Query,
    SessionObject,
)
from sentient_assist.runtime.agent import AbstractAgent
from sentient_assist.runtime.channel import Channel
from sentient_assist.runtime.errors import InputError
from sentient_assist.runtime.pauses import MAX_TOKEN_CHARS, PauseKind
from sentient_assist.runtime.run import ChannelHook, RunStats
from sentient_assist.runtime.session import Session
from sentient_assist.server.chat_turns import chat_history
from sentient_assist.server.json_shape import check_value_shape

# What a result keeps in memory, in characters: its text and its documents' JSON. Past it the
# run is ended, and the result is an error.
MAX_KEPT_CHARS = 8 * 1024 * 1024
TOO_LONG = ErrorContent(
    error_message=f"The answer is longer than {MAX_KEPT_CHARS:,} characters, the most one tool result holds.",
    error_code=500,
)
PARAGRAPH = "\n\n"
# A tool's name, as MCP (SEP-986) has it.
_TOOL_NAME = re.compile(r"[A-Za-z0-9._-]{1,128}")
_NOT_IN_A_TOOL_NAME = re.compile(r"[^A-Za-z0-9._-]")
_SEALED = re.compile(rf"[A-Za-z0-9_=-]{{1,{MAX_TOKEN_CHARS}}}")
_PACKED = re.compile(r"[A-Za-z0-9_-]+")
_KINDS: dict[str, PauseKind] = {"ask_user": "ask_user", "interrupt": "interrupt"}

Note = tuple[str, str]  # what a progress notification says: the event's name, and its text ("": none)


def tool_name(agent: AbstractAgent) -> str:
    """The agent's name as a tool's: the characters MCP allows, others made `_`."""
    name = agent.name
    return name if _TOOL_NAME.fullmatch(name) else (_NOT_IN_A_TOOL_NAME.sub("_", name)[:128] or "agent")


INPUT_SCHEMA: JSONObject = {
    "type": "object",
    "properties": {
        "prompt": {
            "type": "string",
            "description": "What to ask the agent. To answer a question it asked: the answer.",
        },
        "history": {
            "type": "array",
            "description": "Optional: the earlier turns of this conversation with the agent, oldest first.",
            "maxItems": MAX_INTERACTIONS,
            "items": {
                "type": "object",
                "properties": {
                    "prompt": {"type": "string", "description": "What was asked."},
                    "answer": {"type": "string", "description": "What the agent answered."},
                },
                "required": ["prompt"],
                "additionalProperties": False,
            },
        },
        "resume_token": {
            "type": "string",
            "description": "Only to answer a question the agent asked: the resume_token that came with the "
            "question, as it was. The conversation is then the question's (`history` is not read).",
        },
    },
    "required": ["prompt"],
    "additionalProperties": False,  # refused before the SDK parses them (`check_call_shape`)
}
OUTPUT_SCHEMA: JSONObject = {
    "type": "object",
    "properties": {
        "documents": {
            "type": "array",
            "description": "The JSON documents the agent sent (sources, tool calls, stages, ...), in order.",
            "items": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "content": {"type": "object"}},
                "required": ["name", "content"],
            },
        },
        "pause": {
            "type": "object",
            "description": "The agent asks before it goes on: call the tool again with the answer as "
            "`prompt` and this `resume_token`.",
            "properties": {
                "kind": {"type": "string", "enum": ["ask_user", "interrupt"]},
                "question": {"type": "string"},
                "choices": {"type": "array", "items": {"type": "string"}},
                "tool_call": {"type": "object"},
                "resume_token": {"type": "string"},
            },
            "required": ["kind", "question", "resume_token"],
        },
        "error": {
            "type": "object",
            "properties": {
                "message": {"type": "string"},
                "code": {"type": ["integer", "string"]},
                "details": {"type": "object"},
            },
            "required": ["message"],
        },
    },
    "required": ["documents"],
}


def agent_tool(agent: AbstractAgent) -> types.Tool:
    """The one tool the served agent is: its name and description."""
    return types.Tool(
        name=tool_name(agent),
        description=agent.description or f"Ask the agent {agent.name}.",
        input_schema=INPUT_SCHEMA,
        output_schema=OUTPUT_SCHEMA,
    )


ARGUMENTS = ("prompt", "history", "resume_token")
TURN_FIELDS = ("prompt", "answer")


def check_call_shape(raw: bytes) -> None:
    """InputError naming where, before the SDK parses a message, for what the SDK would hold as
    Python objects for the whole of a call (about twenty times its JSON): an argument of
    tools/call that is not the tool's, a field of a history turn that is not a turn's, a
    history longer than the tool reads; and, but for the arguments' own strings, more JSON
    values than server/json_shape.py allows (in `params`, its `_meta`, anywhere)."""
    try:
        message = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return  # the SDK answers for that
    rest = message
    params = message.get("params") if isinstance(message, dict) and message.get("method") == "tools/call" else None
    arguments = params.get("arguments") if isinstance(params, dict) else None
    if isinstance(params, dict) and isinstance(arguments, dict):
        for name in arguments:
            if name not in ARGUMENTS:
                raise InputError(f"arguments.{name}", "not an argument of this tool: " + ", ".join(ARGUMENTS))
        history = arguments.get("history")
        if isinstance(history, list):
            if len(history) > MAX_INTERACTIONS:
                raise InputError("history", f"at most {MAX_INTERACTIONS} turns")
            for index, turn in enumerate(history):
                for name in turn if isinstance(turn, dict) else ():
                    if name not in TURN_FIELDS:
                        raise InputError(f"history[{index}].{name}", "a turn is {prompt, answer}")
        # The arguments are read compactly (ToolCall); their values are checked there.
        rest = {**message, "params": {**params, "arguments": {}}}
    check_value_shape(rest)


class ToolCall:
    """A call's arguments, read: the agent's query and session, and the compact history, whose
    prompts, then the query's, a pause of this run is bound to."""

    __slots__ = ("query", "session", "history")

    def __init__(self, arguments: Mapping[str, object] | None, agent_name: str) -> None:
        arguments = arguments or {}
        prompt = arguments.get("prompt")
        if not isinstance(prompt, str):
            raise InputError("prompt", "a string is required: what to ask the agent")
        token = arguments.get("resume_token")
        records: list[tuple[list[str], list[str], tuple[PauseKind, str] | None]]
        if token is not None and token != "":
            if not isinstance(token, str):
                raise InputError("resume_token", "a string, as the question's result gave it")
            kind, sealed, prompts = unpack_resume_token(token)
            records = [([asked], [], None) for asked in prompts[:-1]]
            records.append(([prompts[-1]], [], (kind, sealed)))
        else:
            records = [([asked], [answer], None) for asked, answer in _history(arguments.get("history"))]
        # Kept compact, as the other faces' histories are (the service counts what it holds).
        self.history = chat_history(records, agent_name)
        session_object = SessionObject(processor_id=agent_name, activity_id=ULID(), request_id=ULID())
        session_object.__dict__["interactions"] = self.history
        self.session = Session(session_object)
        self.query = Query(id=ULID(), prompt=prompt)


def _history(value: object) -> list[tuple[str, str]]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise InputError("history", "a list of earlier turns, each {prompt, answer}")
    if len(value) > MAX_INTERACTIONS:
        raise InputError("history", f"at most {MAX_INTERACTIONS} turns")
    turns = []
    for index, turn in enumerate(value):
        asked = turn.get("prompt") if isinstance(turn, dict) else None
        answer = turn.get("answer", "") if isinstance(turn, dict) else None
        if not isinstance(asked, str):
            raise InputError(f"history[{index}].prompt", "a string is required")
        if not isinstance(answer, str):
            raise InputError(f"history[{index}].answer", "a string, or none")
        turns.append((asked, answer))
    return turns


def pack_resume_token(kind: PauseKind, sealed: str, prompts: list[str]) -> str:
    """`<kind>.<the sealed token>.<the conversation's prompts, JSON in base64url>`: what the call
    that answers the pause gives back."""
    packed = base64.urlsafe_b64encode(json.dumps(prompts, separators=(",", ":")).encode()).rstrip(b"=")
    return f"{kind}.{sealed}.{packed.decode()}"


def unpack_resume_token(token: str) -> tuple[PauseKind, str, list[str]]:
    """The pause's kind, its sealed token and its conversation's prompts; InputError when
    `token` is not in the form this face gives (whether it holds is the run's to check)."""
    refused = InputError("resume_token", "not one this agent gave; give the question's resume_token as it was")
    parts = token.split(".")
    if len(parts) != 3 or parts[0] not in _KINDS or not _SEALED.fullmatch(parts[1]):
        raise refused
    kind, sealed, packed = _KINDS[parts[0]], parts[1], parts[2]
    if not _PACKED.fullmatch(packed):
        raise refused
    try:
        prompts = json.loads(base64.urlsafe_b64decode(packed + "=" * (-len(packed) % 4)))
    except (binascii.Error, ValueError):
        raise refused from None
    valid = isinstance(prompts, list) and 0 < len(prompts) <= MAX_INTERACTIONS + 1
    if not valid or not all(isinstance(prompt, str) for prompt in prompts):
        raise refused
    return kind, sealed, prompts


def _sendable(text: str) -> str:
    """`text` as UTF-8 can carry it: a lone surrogate (valid in a JSON request) becomes "?"."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")
    return text


class ToolAnswer:
    """Reads one run's events, in order, into the call's result (the module's table); `read()`
    gives the progress note each makes, or None. Past MAX_KEPT_CHARS nothing more is kept: that
    is an error, and `too_long` tells its reader to end the run."""

    def __init__(self, tool: str, call: ToolCall) -> None:
        self.tool = tool
        # The conversation's prompts, for the resume token of a pause: read off the compact
        # history when one comes (a list of 10,000 short strings held would take several MB).
        self._history, self._prompt = call.history, call.query.prompt
        self._answer: list[str] = []  # FINAL_RESPONSE text
        self._held: list[str] = []  # other text: the answer if no FINAL_RESPONSE comes
        self._held_from: object = None
        self._documents: list[JSONObject] = []
        self._pause: dict[str, object] | None = None
        self._pause_text = ""
        self._error: ErrorContent | None = None
        self._kept = 0
        self.too_long = False
        self.ended = False

    def read(self, event: ResponseEvent) -> Note | None:
        if type(event) is TextChunkEvent or type(event) is TextBlockEvent:
            text: str = event.content
            name: str = event.event_name
            if not text:
                return None  # the end of a stream
            if name == names.FINAL_RESPONSE:
                if not self._answer:
                    self._held.clear()  # no longer the answer
                self._keep(self._answer, text)
            elif name != names.THINKING and not self._answer:
                source = event.stream_id if type(event) is TextChunkEvent else object()
                if self._held and source != self._held_from:
                    text = PARAGRAPH + text
                self._keep(self._held, text)
                self._held_from = source
            return name, event.content
        if type(event) is DocumentEvent:
            name = event.event_name
            content = event.content
            if name == names.ASK_USER or name == names.INTERRUPT:
                self._paused("ask_user" if name == names.ASK_USER else "interrupt", content)
                return None
            # Checked (and copied) now, as /assist frames it: later changes to it are not sent.
            document = _sendable(dumps_json(content))
            if self._count(len(document)):
                self._documents.append({"name": name, "content": json.loads(document)})
            return name, ""
        if type(event) is ErrorEvent:
            error: ErrorContent = event.content
            self._error = self._error or error
            return "error", error.error_message
        if type(event) is DoneEvent:
            self.ended = True
        return None

    def _keep(self, kept: list[str], text: str) -> None:
        if self._count(len(text)):
            kept.append(text)

    def _count(self, chars: int) -> bool:
        self._kept += chars
        if self._kept <= MAX_KEPT_CHARS:
            return True
        if not self.too_long:
            self.too_long = True
            self._error = self._error or TOO_LONG
        return False

    def _paused(self, kind: PauseKind, content: Mapping[str, object]) -> None:
        question = content.get("question")
        question = question if isinstance(question, str) else ""
        pause: dict[str, object] = {"kind": kind, "question": question}
        lines = [question] if question else []
        choices = content.get("choices")
        if kind == "ask_user" and isinstance(choices, list) and all(isinstance(choice, str) for choice in choices):
            if choices:
                pause["choices"] = choices
                lines.append("\n".join(f"- {choice}" for choice in choices))
        call = content.get("tool_call")
        if kind == "interrupt" and isinstance(call, dict) and isinstance(call.get("name"), str):
            pause["tool_call"] = call
            if not question:
                lines.append(f"May I run {call['name']}?")
            lines.append(f"`{call['name']}({dumps_json(call.get('arguments') or {})})`")
        if not lines:
            lines.append("The agent is waiting for your answer.")
        token = content.get("token")
        if isinstance(token, str) and _SEALED.fullmatch(token):
            pause["resume_token"] = resume = pack_resume_token(kind, token, [*self._history.prompts(), self._prompt])
            lines.append(
                f"To answer, call {self.tool} again with the answer as `prompt` and this `resume_token`:\n{resume}"
            )
            self._pause = pause
        self._pause_text = PARAGRAPH.join(lines)

    def result(self) -> types.CallToolResult:
        """The call's result, once the run has ended."""
        text = "".join(self._answer or self._held)
        if self._pause_text:
            text = text + PARAGRAPH + self._pause_text if text else self._pause_text
        content: list[types.ContentBlock] = [types.TextContent(text=_sendable(text))] if text else []
        structured: dict[str, Any] = {"documents": self._documents}
        if self._pause is not None:
            structured["pause"] = self._pause
        error = self._error
        if error is not None:
            message = _sendable(error.error_message)
            content.append(types.TextContent(text=f"{message} (error {error.error_code})"))
            structured["error"] = {"message": message, "code": error.error_code}
            if error.details:
                structured["error"]["details"] = json.loads(_sendable(dumps_json(error.details)))
        return types.CallToolResult(content=content, structured_content=structured, is_error=error is not None)


def refusal(message: str, code: int = 400) -> types.CallToolResult:
    """The result of a call the agent never ran: arguments it cannot take (400), a budget it is
    past (503, as /assist's)."""
    return types.CallToolResult(
        content=[types.TextContent(text=f"{message} (error {code})")],
        structured_content={"documents": [], "error": {"message": message, "code": code}},
        is_error=True,
    )


def progress_message(note: Note) -> str:
    """What a progress notification says of an event: the answer's text as it comes; another
    text as `NAME: text`; a document or error by its name."""
    name, text = note
    if name == names.FINAL_RESPONSE:
        return _sendable(text)
    return _sendable(f"{name}: {text}" if text else name)


def merged(notes: list[Note | None]) -> list[Note]:
    """A batch's notes, each run of text under one name in one note."""
    out: list[Note] = []
    for note in notes:
        if note is None:
            continue
        if out and note[1] and out[-1][0] == note[0] and out[-1][1]:
            out[-1] = (note[0], out[-1][1] + note[1])
        else:
            out.append(note)
    return out


class AnswerHook(ChannelHook[Note | None]):
    """The run's hook: each event is read into the answer (in the agent's task, as it is sent:
    one that is not JSON fails there, as on /assist), and its note goes on the channel."""

    __slots__ = ("_answer",)

    def __init__(self, channel: Channel[Note | None], stats: RunStats, answer: ToolAnswer) -> None:
        super().__init__(channel, stats)
        self._answer = answer

    def encode(self, event: ResponseEvent) -> Note | None:
        return self._answer.read(event)

    def size(self, item: Note | None) -> int:
        return 0 if item is None else len(item[1])
