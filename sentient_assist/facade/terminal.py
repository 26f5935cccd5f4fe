"""The terminal chat: each event rendered the way a person wants to read it (rich)."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

from rich.console import Console
from rich.json import JSON
from rich.text import Text

from sentient_assist.facade.agent import Agent
from sentient_assist.facade.events import AgentEvent
from sentient_assist.facade.result import PendingInterrupt
from sentient_assist.protocol.history import Message

PROMPT = "[bold cyan]you ›[/] "
_MAX_INLINE = 160


class EventRenderer:
    """Writes events as they come: the answer streams in place, the rest as compact lines."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self._open_stream: tuple[str, str | None] | None = None  # (kind, stream id) being written inline

    def _end_line(self) -> None:
        if self._open_stream is not None:
            self.console.print()
            self._open_stream = None

    def _inline(self, kind: str, stream_id: str | None, text: Text, label: Text | None = None) -> None:
        if self._open_stream != (kind, stream_id):
            self._end_line()
            if label is not None:
                self.console.print(label, end="")
            self._open_stream = (kind, stream_id)
        self.console.print(text, end="", soft_wrap=True)

    def _line(self, text: Text | JSON) -> None:
        self._end_line()
        self.console.print(text, soft_wrap=True)

    def render(self, event: AgentEvent) -> None:
        kind, call = event.kind, event.tool_call
        if kind == "text_delta":
            self._inline(kind, event.stream_id, Text(event.text or ""))
        elif kind == "thinking":
            self._inline(
                kind, event.stream_id, Text(event.text or "", style="dim italic"), Text("thinking: ", style="dim")
            )
        elif kind == "text":
            self._inline(kind, event.stream_id, Text(event.text or ""), Text(f"{event.event_name}: ", style="bold"))
        elif kind == "text_block":
            self._line(Text.assemble((f"{event.event_name}: ", "bold"), event.text or ""))
        elif kind == "document":
            self._line(Text(event.event_name, style="bold"))
            self.console.print(JSON.from_data(event.data or {}))
        elif kind == "tool_call" and call is not None:
            self._line(Text(f"→ {call.name}({_compact(call.arguments)})", style="cyan"))
        elif kind == "tool_result" and call is not None:
            if call.error is not None:
                self._line(Text(f"← {call.name} failed: {call.error}", style="red"))
            else:
                self._line(Text(f"← {call.name}: {_compact(call.result)}", style="green"))
        elif kind == "handoff" and event.handoff is not None:
            self._line(Text(f"⇢ handing off to {event.handoff.to_agent}", style="magenta"))
        elif kind == "stage" and event.stage is not None:
            stage = event.stage
            outcome = f" {stage.outcome}" if stage.outcome else ""
            self._line(Text(f"· {stage.stage} {stage.phase}{outcome}", style="dim"))
        elif kind == "usage" and event.usage is not None:
            usage = event.usage
            self._line(Text(f"tokens: {usage.input_tokens} in, {usage.output_tokens} out", style="dim"))
        elif kind in ("ask_user", "interrupt") and event.interrupt is not None:
            self._line(Text(f"? {_question(event.interrupt)}", style="bold yellow"))
        elif kind == "error" and event.error is not None:
            self._line(Text(f"error {event.error.code}: {event.error.message}", style="bold red"))
        elif kind == "cancelled":
            self._line(Text("(cancelled)", style="dim"))
        elif kind == "done":
            self._end_line()


def _question(interrupt: PendingInterrupt) -> str:
    """What the person is asked: the question, its choices, or the tool call to approve."""
    text = interrupt.question
    if interrupt.choices:
        text += f" [{' / '.join(interrupt.choices)}]"
    if interrupt.tool_call is not None:
        call = interrupt.tool_call
        text = (text + " " if text else "") + f"approve {call.name}({_compact(call.arguments)})?"
    return text


def _compact(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return text if len(text) <= _MAX_INLINE else text[: _MAX_INLINE - 1] + "…"


async def _read_line(console: Console) -> str:
    """console.input in a daemon thread: the loop stays free, and Ctrl-C never waits on it."""
    loop = asyncio.get_running_loop()
    answer: asyncio.Future[str] = loop.create_future()

    def settle(line: str | None) -> None:
        if not answer.done():
            answer.set_result(line) if line is not None else answer.set_exception(EOFError())

    def read() -> None:
        try:
            line: str | None = console.input(PROMPT)
        except BaseException:  # EOFError (Ctrl-D), KeyboardInterrupt: the chat ends
            line = None
        loop.call_soon_threadsafe(settle, line)

    threading.Thread(target=read, daemon=True).start()
    return await answer


async def chat(agent: Agent, console: Console, title: str) -> None:
    """Turn after turn until Ctrl-D (or Ctrl-C); each turn sends the history so far."""
    console.print(Text.assemble(("chatting with ", "dim"), (title, "bold"), (" · Ctrl-D to leave", "dim")))
    history: tuple[Message, ...] = ()
    renderer = EventRenderer(console)
    while True:
        try:
            prompt = await _read_line(console)
        except EOFError:
            console.print()
            return
        if not prompt.strip():
            continue
        async with agent.stream(prompt, history=history) as events:
            async for event in events:
                renderer.render(event)
            history = events.result().messages
