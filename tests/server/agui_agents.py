"""The agents the AG-UI face's tests serve (tests/server/test_agui_face.py).

`AguiAgent`: ScriptedAgent's behaviours (tests/support/agents.py; the prompt picks one), and a
few that send every kind of event /agui maps. `agui_llm()`: an LLMAgent on a stand-in model,
which calls the client's tools, asks the user, needs approvals and says what it was told.
"""

from __future__ import annotations

import asyncio

from sentient_assist import AskUser, LLMAgent, ResponseHandler, Session
from sentient_assist.events import FINAL_RESPONSE
from sentient_assist.testing import FunctionModel, ScriptedCall, ScriptedReply
from tests.support.agents import ScriptedAgent, notify


class AguiAgent(ScriptedAgent):
    name = "agui-agent"
    description = "Test agent for /agui: its prompt picks a behaviour."

    async def _everything(self, session: Session, argument, handler: ResponseHandler) -> None:
        """Every kind of event: reasoning, a stage, a tool call and its result, a hand-off,
        sources (a document), a text block, usage, an output, then the answer."""
        thinking = handler.create_text_stream("THINKING")
        await thinking.emit_chunk("Let me ")
        await thinking.emit_chunk("think.")
        await thinking.complete()
        await handler.emit_stage("search", "start", "running")
        await handler.emit_json("TOOL_CALL", {"id": "call-1", "name": "lookup", "arguments": {"q": "answer"}})
        await handler.emit_json("TOOL_RESULT", {"id": "call-1", "name": "lookup", "result": {"hits": 3}, "error": None})
        await handler.emit_stage("search", "end", "ok", counts={"hits": 3})
        await handler.emit_stage("route", "end", "chosen", capability="weather")
        await handler.emit_json("HANDOFF", {"to_agent": "weather", "argument": {"city": "Lima"}})
        await handler.emit_json("SOURCES", {"results": [{"title": "a source", "url": "https://example.com"}]})
        await handler.emit_text_block("STATUS", "found it")
        await handler.emit_json("USAGE", {"requests": 1, "input_tokens": 12, "output_tokens": 5, "total_tokens": 17})
        await handler.emit_json("OUTPUT", {"output": {"answer": 42}})
        answer = handler.create_text_stream(FINAL_RESPONSE)
        for word in ("Forty", "-two", "."):
            await answer.emit_chunk(word)
        await answer.complete()
        await handler.complete()

    async def _echo(self, session: Session, argument, handler: ResponseHandler) -> None:
        """The conversation as the agent sees it: its past prompts and answers, and the input's state and context."""
        given = handler.run_input
        past = [
            {"prompt": i.request.event.prompt, "answers": [r.event.content for r in i.responses]}
            for i in session.get_interactions()
        ]
        await handler.emit_json(
            "SEEN",
            {
                "prompt": argument,
                "past": past,
                "state": given.state,
                "context": [c.value for c in given.context],
            },
        )
        await handler.respond(FINAL_RESPONSE, f"You said {argument}.")

    async def _fail(self, session: Session, argument, handler: ResponseHandler) -> None:
        """An error the agent reports itself (code 429), a second one, and an answer after them."""
        await handler.emit_error("rate limited upstream", error_code=429)
        await handler.emit_error("and again", error_code=503)
        await handler.respond(FINAL_RESPONSE, "partial answer")

    async def _slowly(self, session: Session, argument, handler: ResponseHandler) -> None:
        """`slowly:<words>:<path>`: words a fifth of a second apart; `path` is written when it is cancelled."""
        count, _, path = argument.partition(":")
        answer = handler.create_text_stream(FINAL_RESPONSE)
        try:
            for index in range(int(count)):
                await answer.emit_chunk(f"word{index} ")
                await asyncio.sleep(0.2)
        except asyncio.CancelledError:
            if path:
                with open(path, "w") as cancelled:
                    cancelled.write("cancelled")
            raise
        await answer.complete()
        await handler.complete()


def _decide(messages, tools) -> ScriptedReply:
    """A stand-in model: `weather` calls the client's `get_weather`, `ask` asks the user,
    `approve` calls a tool that needs approval, `told` repeats its system message; a tool's
    result (the client's, the answer, the call's) is repeated back."""
    last = messages[-1]
    if last.role == "tool":
        return ScriptedReply(text=f"Got: {last.content}")
    if last.content == "weather":
        return ScriptedReply(tool_calls=(ScriptedCall("get_weather", {"city": "Lima"}),))
    if last.content == "ask":
        return ScriptedReply(tool_calls=(ScriptedCall("ask_user", {"question": "Which city?", "choices": ["Oslo"]}),))
    if last.content == "approve":
        return ScriptedReply(tool_calls=(ScriptedCall("notify", {"to": "ana"}),))
    if last.content == "told":
        system = [m.content for m in messages if m.role == "system"]
        return ScriptedReply(text=" | ".join(system) + " | tools: " + ",".join(t.name for t in tools))
    return ScriptedReply(text="Nothing to do.")


def agui_llm() -> LLMAgent:
    return LLMAgent(
        name="agui-llm",
        model=FunctionModel(_decide),
        system_prompt="You are a test.",
        tools=[notify],
        ask_user=AskUser(),
    )
