"""An agent's run as an OpenAI chat answer: its events read, in order, into `chat.completion.chunk`
lines (streaming) or into one `chat.completion` (not streaming).

- `FINAL_RESPONSE` (a stream or a block): `content`.
- `THINKING`: `reasoning_content`.
- `ASK_USER`, `INTERRUPT`: `content`, the question (its choices, or the tool call to approve),
  and the pause's token (sentient_assist/server/openai/pauses.py).
- Any other text block or stream: `content`, at the end, only when the run sent no
  `FINAL_RESPONSE` (the rule of a turn of history, docs/protocol.md); held until then, and
  dropped at the first `FINAL_RESPONSE`.
- `USAGE`: `usage`, summed over the run.
- `error`: an error object; a `data:` line mid-stream, the whole answer's status when not streaming.
- `done`: the last chunk (`finish_reason: "stop"`), the usage chunk if asked for, `data: [DONE]`.
- Any other JSON document (`TOOL_CALL`, `TOOL_RESULT`, `HANDOFF`, `STAGE`, `SOURCES`, `OUTPUT`,
  ...): nothing. Never `tool_calls`, which a client would try to run.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from pydantic import ValidationError

from sentient_assist.protocol import conventions as names
from sentient_assist.protocol.conventions import TokenUsage
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
from sentient_assist.runtime.channel import Channel
from sentient_assist.runtime.pauses import PauseKind
from sentient_assist.runtime.run import ChannelHook, RunStats
from sentient_assist.server.openai import pauses as openai_pauses
from sentient_assist.server.openai.errors import error_object

DONE_LINE = b"data: [DONE]\n\n"
FINISH_REASON = "stop"  # a pause, too: the run has ended, and the question is the content
# What separates the question of a pause from the answer before it, and two other texts.
PARAGRAPH = "\n\n"
# What a reader keeps in memory, in characters: the text held in case it is the answer, and a
# completion's whole answer. A stream's answer goes out as it comes and is not bounded by it.
MAX_KEPT_CHARS = 8 * 1024 * 1024
HELD_TOO_LONG = ErrorContent(
    error_message=f"The answer is longer than {MAX_KEPT_CHARS:,} characters, the most kept of text "
    "that is not a FINAL_RESPONSE; the rest was left out.",
    error_code=500,
)
COMPLETION_TOO_LONG = ErrorContent(
    error_message=f"The answer is longer than {MAX_KEPT_CHARS:,} characters, the most one "
    "chat.completion holds; ask for it streamed (stream: true).",
    error_code=500,
)
# JSON leaves these raw, but Python's line splitters (the openai SDK's among them) end a line there.
_LINE_BREAKS_JSON_KEEPS = re.compile("[\x85\u2028\u2029]")


def _json(value: object) -> str:
    text = dumps_json(value)
    if _LINE_BREAKS_JSON_KEEPS.search(text) is not None:
        text = _LINE_BREAKS_JSON_KEEPS.sub(lambda match: f"\\u{ord(match.group()):04x}", text)
    return text


def _bytes(text: str) -> bytes:
    # A lone surrogate (valid in a JSON request) has no UTF-8 form: replaced rather than failing.
    return text.encode("utf-8", "replace")


def usage_object(usage: TokenUsage) -> dict[str, int]:
    """USAGE in OpenAI's names; 0 means not reported (docs/protocol.md)."""
    return {
        "prompt_tokens": usage.input_tokens,
        "completion_tokens": usage.output_tokens,
        "total_tokens": usage.total_tokens,
    }


def error_status(error: ErrorContent) -> int:
    """The HTTP status an `error` event stands for: its code when it is one, else 500."""
    code = error.error_code
    return code if isinstance(code, int) and 400 <= code <= 599 else 500


class AnswerReader:
    """Reads one run's events, in order, as the module's table says; `read()` gives the bytes
    to send for each (none when not streaming)."""

    def __init__(self, completion_id: str, created: int, model: str) -> None:
        self.completion_id = completion_id
        self.created = created
        self.model = model
        self.usage = TokenUsage()
        self._answered = False  # some FINAL_RESPONSE text came
        self._said = False  # some content went out
        self._held: list[str] = []  # other text, the answer if no FINAL_RESPONSE comes
        self._held_from: object = None  # the stream id (or a block's own key) the last held text came from
        self._held_chars = 0
        self._held_over = False  # some held text was left out: past MAX_KEPT_CHARS

    def read(self, event: ResponseEvent) -> bytes:
        if type(event) is TextChunkEvent or type(event) is TextBlockEvent:
            text: str = event.content
            if not text:
                return b""  # the end of a stream
            name = event.event_name
            if name == names.FINAL_RESPONSE:
                if not self._answered:
                    self._answered = self._said = True
                    self._held.clear()  # no longer the answer: freed now, not at the end
                return self.content(text)
            if name == names.THINKING:
                return self.reasoning(text)
            if not self._answered:
                self._hold(text, event.stream_id if type(event) is TextChunkEvent else object())
            return b""
        if type(event) is DocumentEvent:
            name = event.event_name
            if name == names.USAGE:
                self._add_usage(event.content)
            elif name == names.ASK_USER or name == names.INTERRUPT:
                return self._say(self._held_text() + _pause_text(name, event.content)) + self._held_left_out()
            return b""
        if type(event) is ErrorEvent:
            return self.error(event.content)
        if type(event) is DoneEvent:
            held = self._held_text()
            return (self._say(held) if held else b"") + self._held_left_out() + self.end()
        return b""

    # What each kind of output is: streamed as chunks, or kept for one completion.
    def content(self, text: str) -> bytes:
        raise NotImplementedError

    def reasoning(self, text: str) -> bytes:
        raise NotImplementedError

    def error(self, error: ErrorContent) -> bytes:
        raise NotImplementedError

    def end(self) -> bytes:
        raise NotImplementedError

    def _say(self, text: str) -> bytes:
        """Content after whatever content came before it, a paragraph apart."""
        if self._said:
            text = PARAGRAPH + text
        self._said = True
        return self.content(text)

    def _hold(self, text: str, source: object) -> None:
        if self._held and source != self._held_from:
            text = PARAGRAPH + text
        self._held_chars += len(text)
        if self._held_chars > MAX_KEPT_CHARS:
            self._held_over = True  # said with the held text, if it turns out to be the answer
            return
        self._held.append(text)
        self._held_from = source

    def _held_text(self) -> str:
        """The other text, once it is known to be the answer (no FINAL_RESPONSE came); taken once."""
        if self._answered or not self._held:
            return ""
        text = "".join(self._held)
        self._held.clear()
        return text

    def _held_left_out(self) -> bytes:
        """The error that says the answer (the held text) was cut short, once, if it was."""
        if not self._held_over or self._answered:
            return b""
        self._held_over = False
        return self.error(HELD_TOO_LONG)

    def _add_usage(self, content: Mapping[str, object]) -> None:
        try:
            self.usage += TokenUsage.model_validate(content)
        except ValidationError:
            pass  # not the convention's shape: not a bill


def _pause_text(event_name: str, content: Mapping[str, object]) -> str:
    """A pause as a chat message: the question, what to choose from (or what would be run),
    and the marker that carries its token back with the next turn."""
    question = content.get("question")
    lines = [question] if isinstance(question, str) and question else []
    if event_name == names.ASK_USER:
        choices = content.get("choices")
        if isinstance(choices, list) and choices and all(isinstance(choice, str) for choice in choices):
            lines.append("\n".join(f"- {choice}" for choice in choices))
        kind: PauseKind = "ask_user"
    else:
        call = content.get("tool_call")
        if isinstance(call, dict) and isinstance(call.get("name"), str):
            if not lines:
                lines.append(f"May I run {call['name']}?")
            lines.append(f"`{call['name']}({_json(call.get('arguments') or {})})`")
        kind = "interrupt"
    text = PARAGRAPH.join(lines) or "The agent is waiting for your answer."
    token = content.get("token")
    if isinstance(token, str) and openai_pauses.is_token(token):
        text += openai_pauses.marker(kind, token)
    return text


class ChunkWriter(AnswerReader):
    """The answer as `data:` lines of `chat.completion.chunk`s, as OpenAI streams them: the
    first says the role, each then carries a piece of `content` or `reasoning_content`."""

    def __init__(self, completion_id: str, created: int, model: str, *, include_usage: bool) -> None:
        super().__init__(completion_id, created, model)
        self._include_usage = include_usage
        self._head = (
            '{"id":"'
            + completion_id
            + '","object":"chat.completion.chunk","created":'
            + str(created)
            + ',"model":'
            + _json(model)
            + ',"choices":['
        )
        self._content_head = "data: " + self._head + '{"index":0,"delta":{"content":'
        self._reasoning_head = "data: " + self._head + '{"index":0,"delta":{"reasoning_content":'
        self._tail = '},"logprobs":null,"finish_reason":null}]}\n\n'
        self._started = False

    def read(self, event: ResponseEvent) -> bytes:
        frames = super().read(event)
        if self._started:
            return frames
        self._started = True
        role = "data: " + self._head + '{"index":0,"delta":{"role":"assistant","content":""}' + self._tail[1:]
        return _bytes(role) + frames

    def content(self, text: str) -> bytes:
        return _bytes(self._content_head + _json(text) + self._tail)

    def reasoning(self, text: str) -> bytes:
        return _bytes(self._reasoning_head + _json(text) + self._tail)

    def error(self, error: ErrorContent) -> bytes:
        body = error_object(error.error_message, error_status(error), code=str(error.error_code))
        return _bytes("data: " + _json(body) + "\n\n")

    def end(self) -> bytes:
        finish = (
            f'data: {self._head}{{"index":0,"delta":{{}},"logprobs":null,"finish_reason":"{FINISH_REASON}"}}]}}\n\n'
        )
        if self._include_usage:
            finish += "data: " + self._head + '],"usage":' + _json(usage_object(self.usage)) + "}\n\n"
        return _bytes(finish) + DONE_LINE


class Completion(AnswerReader):
    """The answer kept whole, for one `chat.completion`; the run's first `error` makes it an error.
    Past MAX_KEPT_CHARS of content and reasoning, nothing more is kept: that is an error (the
    first, unless the run sent one before), and `too_long` tells its reader to end the run."""

    def __init__(self, completion_id: str, created: int, model: str) -> None:
        super().__init__(completion_id, created, model)
        self._content: list[str] = []
        self._reasoning: list[str] = []
        self._kept_chars = 0
        self.failure: ErrorContent | None = None
        self.too_long = False
        self.ended = False

    def content(self, text: str) -> bytes:
        if self._keeps(text):
            self._content.append(text)
        return b""

    def reasoning(self, text: str) -> bytes:
        if self._keeps(text):
            self._reasoning.append(text)
        return b""

    def _keeps(self, text: str) -> bool:
        self._kept_chars += len(text)
        if self._kept_chars <= MAX_KEPT_CHARS:
            return True
        if not self.too_long:
            self.too_long = True
            self.failure = self.failure or COMPLETION_TOO_LONG
        return False

    def error(self, error: ErrorContent) -> bytes:
        self.failure = self.failure or error
        return b""

    def end(self) -> bytes:
        self.ended = True
        return b""

    def body(self) -> dict[str, object]:
        message: dict[str, object] = {"role": "assistant", "content": "".join(self._content)}
        if self._reasoning:
            message["reasoning_content"] = "".join(self._reasoning)
        return {
            "id": self.completion_id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": FINISH_REASON}],
            "usage": usage_object(self.usage),
        }


class AnswerHook(ChannelHook[bytes]):
    """The run's hook: each event, read by `reader`, goes on the channel as the bytes to send."""

    __slots__ = ("_reader",)

    def __init__(self, channel: Channel[bytes], stats: RunStats, reader: AnswerReader) -> None:
        super().__init__(channel, stats)
        self._reader = reader

    def encode(self, event: ResponseEvent) -> bytes:
        return self._reader.read(event)

    def size(self, item: bytes) -> int:
        return len(item)
