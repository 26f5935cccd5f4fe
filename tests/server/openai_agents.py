"""The agent the OpenAI face's tests serve: ScriptedAgent's behaviours (tests/support/agents.py),
and a few whose answers only make sense as a chat. The prompt still picks the behaviour."""

from __future__ import annotations

import json

from fastapi import FastAPI

from sentient_assist import ResponseHandler, Session, add_routes
from sentient_assist.events import FINAL_RESPONSE
from sentient_assist.protocol.history import messages_from
from tests.support.agents import SECRET, ScriptedAgent


class ChatAgent(ScriptedAgent):
    name = "chat-agent"
    description = "Test agent for /v1/chat/completions: its prompt picks a behaviour."

    async def _echo(self, session: Session, argument, handler: ResponseHandler) -> None:
        """The history as it reached the agent, as the answer (JSON)."""
        history = [{"role": m.role, "content": m.content} for m in messages_from(session.get_interactions())]
        await handler.respond(FINAL_RESPONSE, json.dumps({"history": history, "argument": argument}))

    async def _think(self, session: Session, argument, handler: ResponseHandler) -> None:
        """Reasoning, tool activity and sources (none of which is the answer), the answer, two bills."""
        thinking = handler.create_text_stream("THINKING")
        await thinking.emit_chunk("Let me ")
        await thinking.emit_chunk("think.")
        await thinking.complete()
        await handler.emit_json("TOOL_CALL", {"id": "call-1", "name": "lookup", "arguments": {"q": "answer"}})
        await handler.emit_json("TOOL_RESULT", {"id": "call-1", "name": "lookup", "result": {"hits": 3}, "error": None})
        await handler.emit_json("SOURCES", {"results": [{"title": "hidden source", "url": "https://example.com"}]})
        await handler.emit_text_block("PLAN", "a plan that is not the answer")
        answer = handler.create_text_stream(FINAL_RESPONSE)
        for word in ("Forty", "-two", "."):
            await answer.emit_chunk(word)
        await answer.complete()
        await handler.emit_json("USAGE", {"requests": 1, "input_tokens": 10, "output_tokens": 5, "total_tokens": 15})
        await handler.emit_json("USAGE", {"requests": 1, "input_tokens": 3, "output_tokens": 2, "total_tokens": 5})
        await handler.complete()

    async def _say(self, session: Session, argument, handler: ResponseHandler) -> None:
        """The argument, as it came, as the answer (a lone surrogate included)."""
        await handler.respond(FINAL_RESPONSE, argument)

    async def _fail(self, session: Session, argument, handler: ResponseHandler) -> None:
        """`fail:<code>:<path>[:<message>]`: a line added to `path` (one per run), then an error
        with that code (`raise`: the agent raises)."""
        code, _, rest = argument.partition(":")
        path, _, message = rest.partition(":")
        if path:
            with open(path, "a") as runs:
                runs.write("ran\n")
        if code == "raise":
            raise RuntimeError(SECRET)
        await handler.emit_error(message or "it failed", error_code=int(code))
        await handler.complete()

    async def _big(self, session: Session, argument, handler: ResponseHandler) -> None:
        """`big:<event>:<characters>[:final]`: that many characters of a text stream named
        `event`, then (`final`) a short FINAL_RESPONSE."""
        name, _, rest = argument.partition(":")
        count, _, then = rest.partition(":")
        stream = handler.create_text_stream(name)
        piece = "x" * 65_536
        left = int(count)
        while left > 0:
            await stream.emit_chunk(piece[:left])
            left -= len(piece)
        await stream.complete()
        if then == "final":
            await handler.respond(FINAL_RESPONSE, "the short answer")
        await handler.complete()

    async def _resumed(self, session: Session, answer, handler: ResponseHandler) -> None:
        resumed = session.resumed
        text = f"resumed {resumed.pause.kind} with {answer!r}, state {json.dumps(resumed.state, sort_keys=True)}"
        await handler.respond(FINAL_RESPONSE, text)


def _users_app() -> FastAPI:
    app = FastAPI()

    @app.get("/healthz")  # what the tests wait for
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    return app


def user_app() -> FastAPI:
    """An app of a user's own, with the agent added at /bots/chat, the OpenAI face included."""
    app = _users_app()

    @app.get("/v1/models")
    async def users_own_models() -> dict[str, str]:
        return {"owner": "the user's app"}

    add_routes(app, ChatAgent(), path="/bots/chat", openai_prefix="/v1")

    @app.get("/bots/chat/v1/status")  # under the face's prefix, added after it: still the app's
    async def users_own_status() -> dict[str, str]:
        return {"owner": "the user's app"}

    return app


def user_app_without_the_face() -> FastAPI:
    app = _users_app()
    add_routes(app, ChatAgent(), path="/bots/chat")
    return app
