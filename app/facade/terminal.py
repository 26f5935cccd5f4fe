"""The terminal chat: each event rendered the way a person wants to read it (rich)."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

from rich.console import Console
from rich.json import JSON
from rich.text import Text

from app.facade.agent import Agent
from app.facade.events import AgentEvent
from app.protocol.history import Message

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
        kind, data = event.kind, event.data or {}
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
            self.console.print(JSON.from_data(data))
        elif kind == "tool_call":
            self._line(Text(f"→ {data['name']}({_compact(data['arguments'])})", style="cyan"))
        elif kind == "tool_result":
            if data.get("error") is not None:
                self._line(Text(f"← {data['name']} failed: {data['error']}", style="red"))
            else:
                self._line(Text(f"← {data['name']}: {_compact(data.get('result'))}", style="green"))
        elif kind == "handoff":
            self._line(Text(f"⇢ handing off to {data['to_agent']}", style="magenta"))
        elif kind == "stage":
            outcome = f" {data['outcome']}" if data.get("outcome") else ""
            self._line(Text(f"· {data['stage']} {data['phase']}{outcome}", style="dim"))
        elif kind == "usage":
            self._line(Text(f"tokens: {data['input_tokens']} in, {data['output_tokens']} out", style="dim"))
        elif kind == "ask_user":
            self._line(Text(f"? {data['question']}", style="bold yellow"))
        elif kind == "error":
            self._line(Text(f"error {data.get('error_code')}: {event.text}", style="bold red"))
        elif kind == "cancelled":
            self._line(Text("(cancelled)", style="dim"))
        elif kind == "done":
            self._end_line()


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
