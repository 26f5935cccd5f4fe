"""Agents that misbehave on purpose, one behaviour per prompt, for the integration tests.

The prompt is `behaviour` or `behaviour:argument`; paths in arguments are where
the agent writes what it saw (the test process reads them).
"""

from __future__ import annotations

import asyncio
import gc
import os
import time
from pathlib import Path

from sentient_assist import AbstractAgent, Approval, AskUser, LLMAgent, Query, ResponseHandler, Session, tool
from sentient_assist.exceptions import ResponseStreamClosedError
from sentient_assist.testing import FunctionModel, ScriptedCall, ScriptedReply

SECRET = "internal detail the client must never see"


class ScriptedAgent(AbstractAgent):
    name = "scripted"
    description = "Test agent: its prompt picks a behaviour."

    async def assist(self, session: Session, query: Query, response_handler: ResponseHandler) -> None:
        if session.resumed is not None:  # this request answers a pause of ours
            await self._resumed(session, query.prompt, response_handler)
            return
        behaviour, _, argument = query.prompt.partition(":")
        await getattr(self, "_" + behaviour.replace("-", "_"))(session, argument, response_handler)

    async def _raise(self, session, argument, handler: ResponseHandler) -> None:
        stream = handler.create_text_stream("FINAL_RESPONSE")
        await stream.emit_chunk("partial ")
        raise RuntimeError(SECRET)

    async def _cancel_itself(self, session, argument, handler: ResponseHandler) -> None:
        await handler.emit_text_block("STATUS", "about to be cancelled by nobody")
        raise asyncio.CancelledError()

    async def _no_complete(self, session, argument, handler: ResponseHandler) -> None:
        first = handler.create_text_stream("FINAL_RESPONSE")
        second = handler.create_text_stream("THINKING")
        await first.emit_chunk("one ")
        await second.emit_chunk("hmm")
        await first.emit_chunk("two")

    async def _fast(self, session, argument, handler: ResponseHandler) -> None:
        count, _, finish_path = argument.partition(":")
        stream = handler.create_text_stream("FINAL_RESPONSE")
        for index in range(int(count)):
            await stream.emit_chunk(f"{index} ")
        if finish_path:
            Path(finish_path).write_text(repr(time.time()))
        await handler.complete()

    async def _silent(self, session, argument, handler: ResponseHandler) -> None:
        await handler.emit_text_block("STATUS", "thinking quietly")
        await asyncio.sleep(float(argument))
        await handler.respond("FINAL", "spoke at last")

    async def _gated(self, session, argument, handler: ResponseHandler) -> None:
        """`gated:<path>`: a first word, then the rest once the test has made <path> (it does on
        seeing the first word: an answer held back till the end would never let the agent on)."""
        stream = handler.create_text_stream("FINAL_RESPONSE")
        await stream.emit_chunk("first ")
        while not Path(argument).exists():  # noqa: ASYNC110 (made by another process: no Event to wait on)
            await asyncio.sleep(0.01)
        await stream.emit_chunk("second")
        await stream.complete()
        await handler.complete()

    async def _hang(self, session, argument, handler: ResponseHandler) -> None:
        stream = handler.create_text_stream("FINAL_RESPONSE")
        await stream.emit_chunk("waiting ")
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            Path(argument).write_text(repr(time.time()))
            raise

    async def _emit_when_cancelled(self, session, argument, handler: ResponseHandler) -> None:
        stream = handler.create_text_stream("FINAL_RESPONSE")
        await stream.emit_chunk("waiting ")
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            Path(argument).write_text("cancelled")
            await handler.emit_text_block("LATE", "after the client left")  # raises: the response is over

    async def _after_complete(self, session, argument, handler: ResponseHandler) -> None:
        await handler.respond("FINAL", "done already")
        try:
            await handler.emit_text_block("LATE", "too late")
        except ResponseStreamClosedError as exc:
            Path(argument).write_text(type(exc).__name__)

    async def _unanswered_call(self, session, argument, handler: ResponseHandler) -> None:
        """Two tool calls, one answered; the other is still open when it ends (`raise`: by failing)."""
        await handler.emit_json("TOOL_CALL", {"id": "call-1", "name": "search", "arguments": {"q": "a"}})
        await handler.emit_json("TOOL_CALL", {"id": "call-2", "name": "fetch", "arguments": {"url": "b"}})
        await handler.emit_json("TOOL_RESULT", {"id": "call-1", "name": "search", "result": None, "error": None})
        if argument == "raise":
            raise RuntimeError("failed with a call open")
        await handler.complete()

    async def _every_event(self, session, argument, handler: ResponseHandler) -> None:
        await handler.emit_text_block("PLAN", "a plan ✓ ünïcödé\u2028line")
        await handler.emit_json("SOURCES", {"results": [{"n": 1, "ok": True, "x": None, "f": 1.5}]})
        await handler.emit_error("shown to the user", error_code=429, details={"retry": 3})
        stream = handler.create_text_stream("FINAL_RESPONSE")
        for word in ("streamed ", "answer"):
            await stream.emit_chunk(word)
        await stream.complete()
        await handler.complete()

    async def _stats(self, session, argument, handler: ResponseHandler) -> None:
        """What the server process holds right now: for leak checks after many streams."""
        gc.collect()
        await handler.respond(
            "STATS",
            {
                "tasks": len(asyncio.all_tasks()),
                "open_fds": len(os.listdir("/proc/self/fd")),
                "response_handlers": sum(isinstance(o, ResponseHandler) for o in gc.get_objects()),
                "rss_kb": _rss_kb(),
            },
        )

    async def _conventions(self, session, argument, handler: ResponseHandler) -> None:
        """Every reserved event name of docs/protocol.md, and agent-named events besides."""
        thinking = handler.create_text_stream("THINKING")
        await thinking.emit_chunk("Let me ")
        await thinking.emit_chunk("look it up.")
        await thinking.complete()
        await handler.emit_json(
            "STAGE",
            {
                "stage": "search",
                "phase": "start",
                "capability": None,
                "outcome": "running",
                "reason": None,
                "counts": {},
            },
        )
        await handler.emit_json("TOOL_CALL", {"id": "call-1", "name": "search", "arguments": {"q": "weather"}})
        await handler.emit_json("TOOL_CALL", {"id": "call-2", "name": "fetch", "arguments": {"url": "x"}})
        await handler.emit_json("TOOL_RESULT", {"id": "call-1", "name": "search", "result": {"hits": 3}, "error": None})
        await handler.emit_json("TOOL_RESULT", {"id": "call-2", "name": "fetch", "result": None, "error": "timed out"})
        await handler.emit_json(
            "STAGE",
            {
                "stage": "search",
                "phase": "end",
                "capability": "web",
                "outcome": "ok",
                "reason": None,
                "counts": {"hits": 3},
            },
        )
        await handler.emit_json("USAGE", {"requests": 1, "input_tokens": 10, "output_tokens": 5, "total_tokens": 15})
        await handler.emit_json("USAGE", {"requests": 1, "input_tokens": 7, "output_tokens": 0, "total_tokens": 7})
        await handler.emit_json("HANDOFF", {"to_agent": "weather", "argument": {"city": "Oslo"}})
        await handler.emit_json("TOOL_CALL", {"id": "bad"})  # not the convention's shape: a plain document
        await handler.emit_json("SOURCES", {"results": [1, 2]})
        await handler.emit_text_block("PLAN", "look, then answer")
        notes = handler.create_text_stream("NOTES")
        await notes.emit_chunk("a side note")
        await notes.complete()
        await handler.emit_error("one source failed", error_code=502, details={"source": "fetch"})
        answer = handler.create_text_stream("FINAL_RESPONSE")
        for word in ("It ", "is ", "sunny."):
            await answer.emit_chunk(word)
        await answer.complete()
        await handler.emit_json(
            "ASK_USER", {"question": "Which city?", "choices": ["Oslo", "Lima"], "token": "resume-1", "resumable": True}
        )
        await handler.complete()

    async def _ask(self, session, argument, handler: ResponseHandler) -> None:
        """Asks, and ends its response; the answer resumes it (`_resumed`)."""
        stream = handler.create_text_stream("FINAL_RESPONSE")
        await stream.emit_chunk("I need to know one thing.")
        await handler.ask_user("Which city?", choices=["Oslo", "Lima"], state={"step": 1, "asked": argument})

    async def _resumed(self, session, answer, handler: ResponseHandler) -> None:
        resumed = session.resumed
        await handler.respond(
            "RESUMED",
            {"answer": answer, "state": resumed.state, "question": resumed.pause.question, "kind": resumed.pause.kind},
        )

    async def _output(self, session, argument, handler: ResponseHandler) -> None:
        """A typed output, as LLMAgent(output_type=...) sends it (`wrong`: one that is not a Weather)."""
        output = {"city": "Lima", "celsius": 19} if argument != "wrong" else {"city": "Lima"}
        await handler.emit_json("OUTPUT", {"output": output})
        await handler.complete()

    async def _interrupt(self, session, argument, handler: ResponseHandler) -> None:
        """A pause for a person to approve a tool call."""
        call = {"id": "call-7", "name": "send_email", "arguments": {"to": "ana@example.com"}}
        await handler.emit_json(
            "INTERRUPT",
            {"reason": "approval", "question": "Send it?", "tool_call": call, "token": "t-7", "resumable": True},
        )
        await handler.complete()

    async def _session(self, session: Session, argument, handler: ResponseHandler) -> None:
        interactions = session.get_interactions()
        await handler.respond(
            "SESSION",
            {
                "processor_id": session.processor_id,
                "activity_id": str(session.activity_id),
                "request_id": str(session.request_id),
                "interactions": len(interactions),
                "prompts": [i.request.event.prompt for i in interactions],
            },
        )


def _rss_kb() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


@tool(approval=Approval(question="Notify them?"))
def notify(to: str) -> str:
    """Notify someone."""
    return f"notified {to}"


def _decide(messages, tools) -> ScriptedReply:
    """A stand-in model: `ask` asks the user, `approve` calls a tool that needs approval; a
    tool's result (the answer, or the call's) is repeated back."""
    last = messages[-1]
    if last.role == "tool":
        return ScriptedReply(text=f"Got: {last.content}")
    if last.content == "ask":
        return ScriptedReply(tool_calls=(ScriptedCall("ask_user", {"question": "Which city?", "choices": ["Oslo"]}),))
    if last.content == "approve":
        return ScriptedReply(tool_calls=(ScriptedCall("notify", {"to": "ana"}),))
    return ScriptedReply(text="Nothing to do.")


def asking_llm() -> LLMAgent:
    """An LLMAgent that asks the user and needs approvals, on a stand-in model: served at
    /assist by tests (ASSIST_AGENT=tests.support.agents:asking_llm) and run in-process."""
    return LLMAgent(name="asking-llm", model=FunctionModel(_decide), tools=[notify], ask_user=AskUser())
