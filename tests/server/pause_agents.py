"""Agents for tests/server/test_pause_tokens.py, served by `python -m app serve`
(ASSIST_AGENT=tests.server.pause_agents:alpha, :beta or :approver).

Each continuation (a resumed run, an approved tool) appends a line to the file named by the
environment variable PAUSE_TEST_MARKS: the test counts how many times it ran.
"""

from __future__ import annotations

import asyncio
import json
import os

from sentient_assist import AbstractAgent, Approval, LLMAgent, Query, ResponseHandler, Session, tool
from sentient_assist.testing import ScriptedCall, ScriptedModel, ScriptedReply

MARKS = "PAUSE_TEST_MARKS"


def mark(line: str) -> None:
    path = os.environ.get(MARKS)
    if path:
        with open(path, "a", encoding="utf-8") as marks:
            marks.write(line + "\n")


class Asking(AbstractAgent):
    """Asks which city; resumed, it marks the continuation and answers RESUMED."""

    async def assist(self, session: Session, query: Query, response_handler: ResponseHandler) -> None:
        resumed = session.resumed
        if resumed is None:
            await response_handler.ask_user("Which city?", choices=["Oslo"], state={"asked_by": self.name})
            return
        await asyncio.sleep(0.05)  # a continuation that takes a while: parallel replays overlap it
        mark(json.dumps({"agent": self.name, "state": resumed.state}))
        await response_handler.respond("RESUMED", {"by": self.name, "state": resumed.state, "answer": query.prompt})


def alpha() -> Asking:
    return Asking("alpha")


def beta() -> Asking:
    return Asking("beta")


@tool(approval=Approval(question="Send it?"))
def send(to: str) -> str:
    """Send something to someone."""
    mark(json.dumps({"sent": to}))
    return "sent"


def approver() -> LLMAgent:
    """An LLMAgent whose model calls a tool that needs approval, then says it is done."""
    model = ScriptedModel(
        [
            ScriptedReply(tool_calls=(ScriptedCall("send", {"to": "ana"}, id="s1"),)),
            ScriptedReply(text="Done."),
        ]
    )
    return LLMAgent(name="approver", model=model, tools=[send])
