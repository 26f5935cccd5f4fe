"""The agent the MCP face's tests serve (tests/server/test_mcp_face.py): ScriptedAgent's
behaviours (tests/support/agents.py), and a few whose answers are a tool's result. The prompt
still picks the behaviour."""

from __future__ import annotations

import asyncio

from sentient_assist import ResponseHandler, Session
from sentient_assist.events import FINAL_RESPONSE
from tests.support.agents import ScriptedAgent


class MCPFaceAgent(ScriptedAgent):
    name = "mcp-agent"
    description = "Test agent for /mcp: its prompt picks a behaviour."

    async def _answer(self, session: Session, argument, handler: ResponseHandler) -> None:
        """Reasoning, tool activity and sources (documents, not the answer), then the answer."""
        thinking = handler.create_text_stream("THINKING")
        await thinking.emit_chunk("Let me ")
        await thinking.emit_chunk("think.")
        await thinking.complete()
        await handler.emit_json("TOOL_CALL", {"id": "call-1", "name": "lookup", "arguments": {"q": "answer"}})
        await handler.emit_json("TOOL_RESULT", {"id": "call-1", "name": "lookup", "result": {"hits": 3}, "error": None})
        await handler.emit_json("SOURCES", {"results": [{"title": "a source", "url": "https://example.com"}]})
        answer = handler.create_text_stream(FINAL_RESPONSE)
        for word in ("Forty", "-two", "."):
            await answer.emit_chunk(word)
        await answer.complete()
        await handler.complete()

    async def _slowly(self, session: Session, argument, handler: ResponseHandler) -> None:
        """`slowly:<words>`: that many words of an answer, a fifth of a second apart."""
        answer = handler.create_text_stream(FINAL_RESPONSE)
        for index in range(int(argument)):
            await answer.emit_chunk(f"word{index} ")
            await asyncio.sleep(0.2)
        await answer.complete()
        await handler.complete()

    async def _fail(self, session: Session, argument, handler: ResponseHandler) -> None:
        """An error the agent reports itself, with its code."""
        await handler.emit_error("rate limited upstream", error_code=int(argument or 429))
        await handler.complete()
