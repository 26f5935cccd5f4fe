"""The agent the browser tests talk to: its prompt picks what it sends (`behaviour` or
`behaviour:argument`), served with ASSIST_AGENT=tests.browser.agents:PlaygroundTestAgent."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from sentient_assist import AbstractAgent, Query, ResponseHandler, Session
from sentient_assist.events import TextBlockEvent
from sentient_assist.protocol.conventions import ToolCallPayload
from sentient_assist.protocol.events import TextChunkEvent
from sentient_assist.protocol.history import messages_from

# What an agent might slip into its text, names or documents; none of it may run in the page.
HOSTILE = (
    '<script>window.__pwned = "script"</script>'
    '<img src="x" onerror="window.__pwned = \'img\'">'
    "<svg onload=\"window.__pwned = 'svg'\"></svg>"
    "<iframe srcdoc=\"<script>parent.__pwned = 'iframe'</script>\"></iframe>"
    "[a link](javascript:window.__pwned='link') "
    "<a href=\"javascript:window.__pwned='anchor'\">an anchor</a>"
    "<details open ontoggle=\"window.__pwned = 'toggle'\">details</details>"
)
# Markup that makes a browser load what it names, once it is in the page (the CSP aside):
# every URL here has "agent-named" in it, off loopback or on it (relative to the page).
REMOTE = (
    '<table background="http://evil.example/agent-named/table.png">'
    '<tr><td background="/agent-named/td.png">cell</td></tr></table>'
    '<video poster="http://evil.example/agent-named/poster.png" src="/agent-named/video.mp4" autoplay></video>'
    '<audio src="http://evil.example/agent-named/audio.mp3" autoplay></audio>'
    '<picture><source srcset="/agent-named/source.png"><img src="/agent-named/picture.png" alt="pic"></picture>'
    '<img srcset="http://evil.example/agent-named/srcset.png 1x" alt="srcset">'
    '<input type="image" src="/agent-named/input.png">'
    '<object data="http://evil.example/agent-named/object"></object><embed src="/agent-named/embed">'
    '<link rel="stylesheet" href="/agent-named/style.css">'
    '<a href="https://example.com/ok" ping="/agent-named/ping">a pinging link</a>\n\n'
    "![tracker](http://evil.example/agent-named/tracker.png) ![blank]() "
    "[protocol-relative](//evil.example/agent-named/link) [relative](/agent-named/link) "
    "[mail](mailto:someone@example.com)"
)
# Links in a document, as a SOURCES list: only the https one may become a link.
HOSTILE_SOURCES = [
    {"title": "script", "url": "javascript:window.__pwned='source'"},
    {"title": "shouting", "url": " JAVASCRIPT:window.__pwned='source2'"},
    {"title": "data", "url": "data:text/html,<script>window.__pwned='data'</script>"},
    {"title": "protocol-relative", "url": "//evil.example/agent-named/source"},
    {"title": "fine", "url": "https://example.com/fine"},
]


class PlaygroundTestAgent(AbstractAgent):
    name = "playground-test"
    description = "Test agent for the playground: its prompt picks the events it sends."

    async def assist(self, session: Session, query: Query, response_handler: ResponseHandler) -> None:
        if session.resumed is not None:
            await self._resumed(session, query.prompt, response_handler)
            return
        behaviour, _, argument = query.prompt.strip().partition(":")
        method = getattr(self, "_" + behaviour.replace("-", "_"), self._tour)
        await method(session, argument, response_handler)

    async def _every_kind(self, session: Session, argument: str, handler: ResponseHandler) -> None:
        """Each kind of event the page shows, reserved names and the agent's own."""
        thinking = handler.create_text_stream("THINKING")
        for part in ("The user wants ", "every kind ", "of event."):
            await thinking.emit_chunk(part)
        await thinking.complete()
        await handler.emit_text_block("PLAN", "1. Think. 2. Call tools. 3. Answer.")
        await handler.emit_stage("search", "start", outcome="running")
        await handler.emit_json("TOOL_CALL", {"id": "call-1", "name": "search", "arguments": {"q": "weather"}})
        await handler.emit_json("TOOL_CALL", {"id": "call-2", "name": "fetch", "arguments": {"url": "x"}})
        await handler.emit_json("TOOL_RESULT", {"id": "call-2", "name": "fetch", "result": None, "error": "timed out"})
        await handler.emit_json("TOOL_RESULT", {"id": "call-1", "name": "search", "result": {"hits": 3}, "error": None})
        await handler.emit_json(
            "SOURCES",
            {
                "results": [
                    {"title": "Weather in Oslo", "url": "https://example.com/oslo", "snippet": "cold and clear"},
                    {"title": "Not a web link", "url": "javascript:window.__pwned='source'"},
                ]
            },
        )
        await handler.emit_json("FORECAST", {"city": "Oslo", "days": [{"day": 1, "celsius": -3, "snow": True}]})
        await handler.emit_json("HANDOFF", {"to_agent": "weather-specialist", "argument": {"city": "Oslo"}})
        await handler.emit_event(
            TextBlockEvent(
                event_name="REPORT", source="weather-specialist", content="Snow *likely*.", metadata={"model": "tiny"}
            )
        )
        await handler.emit_json("OUTPUT", {"output": {"city": "Oslo", "celsius": -3}})
        await handler.emit_error("one source failed", error_code=502, details={"source": "fetch"})
        notes = handler.create_text_stream("NOTES")
        await notes.emit_chunk("a side note")
        await notes.complete()
        answer = handler.create_text_stream("FINAL_RESPONSE")
        for part in ("It is **cold** in Oslo:\n\n", "- snow likely\n", "- `-3 °C`\n"):
            await answer.emit_chunk(part)
        await answer.complete()
        await handler.emit_json("USAGE", {"requests": 1, "input_tokens": 10, "output_tokens": 5, "total_tokens": 15})
        await handler.emit_json("USAGE", {"requests": 1, "input_tokens": 7, "output_tokens": 3, "total_tokens": 10})
        await handler.complete()

    async def _history(self, session: Session, argument: str, handler: ResponseHandler) -> None:
        """What this request's history says, as the LLM agents read it (docs/protocol.md)."""
        messages = messages_from(session.get_interactions(), keep_events=False)
        seen = {
            "processor_id": session.processor_id,
            "activity_id": str(session.activity_id),
            "messages": [[message.role, message.content] for message in messages],
        }
        # A code block: the page shows it as it is, where Markdown would eat the answer's `**`.
        await handler.respond("SEEN", "```json\n" + json.dumps(seen) + "\n```")

    async def _hang(self, session: Session, argument: str, handler: ResponseHandler) -> None:
        """Streams a word, then waits; writes `argument` (a path) when it is cancelled."""
        stream = handler.create_text_stream("FINAL_RESPONSE")
        await stream.emit_chunk("waiting for ever ")
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            Path(argument).write_text("cancelled")
            raise

    async def _error(self, session: Session, argument: str, handler: ResponseHandler) -> None:
        """An error event the agent sends, then one the service sends for it (it raises)."""
        await handler.emit_error("the weather service is down", error_code=503, details={"retry_after": 30})
        raise RuntimeError("a detail the page must never show")

    async def _ask(self, session: Session, argument: str, handler: ResponseHandler) -> None:
        stream = handler.create_text_stream("FINAL_RESPONSE")
        await stream.emit_chunk("I need to know one thing.")
        await handler.ask_user("Which city?", choices=["Oslo", "Lima"], state={"asked": argument or "a trip"})

    async def _approve(self, session: Session, argument: str, handler: ResponseHandler) -> None:
        """An INTERRUPT: a tool call waits for a yes or a no."""
        stream = handler.create_text_stream("FINAL_RESPONSE")
        await stream.emit_chunk("I am about to delete a file.")
        call = ToolCallPayload(id="call-9", name="delete_file", arguments={"path": "/tmp/old.log"})
        await handler.interrupt("approval", tool_call=call, state={"asked": "deleting /tmp/old.log"})

    async def _tangled(self, session: Session, argument: str, handler: ResponseHandler) -> None:
        """A specialist's event first; then one stream_id under two event names, and a chunk
        after its stream's last one: what the page shows and what it sends back must agree."""
        await handler.emit_event(TextBlockEvent(event_name="REPORT", source="weather-specialist", content="a report"))

        def chunk(event_name: str, content: str, *, is_complete: bool = False) -> TextChunkEvent:
            return TextChunkEvent(
                event_name=event_name, source=self.name, stream_id="s1", is_complete=is_complete, content=content
            )

        await handler.emit_event(chunk("FINAL_RESPONSE", "shown "))
        await handler.emit_event(chunk("NOTES", "a note"))
        await handler.emit_event(chunk("FINAL_RESPONSE", "answer", is_complete=True))
        await handler.emit_event(chunk("FINAL_RESPONSE", " after its end"))
        await handler.complete()

    async def _resumed(self, session: Session, answer: str, handler: ResponseHandler) -> None:
        resumed = session.resumed
        assert resumed is not None
        await handler.respond("FINAL_RESPONSE", f"Resumed with **{answer}** for {resumed.state['asked']}.")

    async def _hostile(self, session: Session, argument: str, handler: ResponseHandler) -> None:
        """Markup everywhere the page shows agent text: streamed Markdown, a text block, a
        document's keys and values, an event's name, an error message."""
        answer = handler.create_text_stream("FINAL_RESPONSE")
        markup = HOSTILE + REMOTE
        for index in range(0, len(markup), 20):  # cut mid-tag, as a model's tokens would
            await answer.emit_chunk(markup[index : index + 20])
        await answer.emit_chunk("\n\nthe end")
        await answer.complete()
        await handler.emit_text_block("NOTE", markup)
        await handler.emit_json(HOSTILE[:60], {HOSTILE: HOSTILE, "nested": [HOSTILE]})
        await handler.emit_json("SOURCES", {"results": HOSTILE_SOURCES})
        await handler.emit_json("LINKS", {"script": HOSTILE_SOURCES[0]["url"], "relative": "//evil.example/x"})
        await handler.emit_error(HOSTILE, error_code=400, details={"html": HOSTILE})
        await handler.complete()

    async def _many(self, session: Session, argument: str, handler: ResponseHandler) -> None:
        """An answer of `argument` chunks, sent as fast as the service takes them."""
        stream = handler.create_text_stream("FINAL_RESPONSE")
        for index in range(int(argument)):
            if index % 100 == 0:
                await stream.emit_chunk(f"\n\n## Part {index // 100 + 1}\n\n")
            else:
                await stream.emit_chunk(f"word{index} " + ("**bold** " if index % 7 == 0 else ""))
        await stream.complete()
        await handler.complete()

    async def _tour(self, session: Session, argument: str, handler: ResponseHandler) -> None:
        """Any other prompt: what a tool-using agent sends, for the screenshots."""
        thinking = handler.create_text_stream("THINKING")
        for part in ("The user asks about the weather in Oslo. ", "I will look it up, ", "then answer briefly."):
            await thinking.emit_chunk(part)
            await asyncio.sleep(0.2)
        await thinking.complete()
        await handler.emit_json("TOOL_CALL", {"id": "call-1", "name": "get_weather", "arguments": {"city": "Oslo"}})
        await handler.emit_json(
            "TOOL_RESULT",
            {"id": "call-1", "name": "get_weather", "result": {"celsius": -3, "sky": "snow"}, "error": None},
        )
        await handler.emit_json(
            "SOURCES",
            {
                "results": [
                    {"title": "Oslo forecast", "url": "https://example.com/oslo", "snippet": "snow showers"},
                    {"title": "Norway climate", "url": "https://example.com/norway", "snippet": "winter averages"},
                ]
            },
        )
        answer = handler.create_text_stream("FINAL_RESPONSE")
        text = (
            "It is **-3 °C** in Oslo, with snow showers.\n\n"
            "| when | sky | °C |\n|---|---|---|\n| now | snow | -3 |\n| tonight | clear | -7 |\n\n"
            "Take a warm coat."
        )
        for word in text.split(" "):
            await answer.emit_chunk(word + " ")
            await asyncio.sleep(0.005)
        await answer.complete()
        await handler.emit_json("USAGE", {"requests": 2, "input_tokens": 412, "output_tokens": 64, "total_tokens": 476})
        await handler.complete()
