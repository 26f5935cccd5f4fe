"""The agents of the A2A tests: A2AFaceAgent, which /a2a serves (tests/server/test_a2a_face.py,
tests/orchestration/test_a2a_agent.py), with ScriptedAgent's behaviours (tests/support/agents.py)
and a few of its own; an agent served by a2a-sdk itself (`sdk_app`); a host whose specialist is
an A2AAgent (`a2a_host`). The prompt picks the behaviour."""

from __future__ import annotations

import asyncio
import os

from a2a.helpers import new_data_part, new_task_from_user_message, new_text_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types.a2a_pb2 import AgentCapabilities, AgentCard, AgentInterface, AgentSkill, TaskState
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from sentient_assist import A2AAgent, HostAgent, ResponseHandler, Session, Specialist
from sentient_assist.events import FINAL_RESPONSE
from tests.orchestration.host_agents import handing_off
from tests.support.agents import ScriptedAgent


class A2AFaceAgent(ScriptedAgent):
    name = "a2a-agent"
    description = "Test agent for /a2a: its prompt picks a behaviour."

    async def _answer(self, session: Session, argument, handler: ResponseHandler) -> None:
        """Reasoning, a tool call and its result, sources, then the answer in three chunks."""
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

    async def _echo_history(self, session: Session, argument, handler: ResponseHandler) -> None:
        """The prompts of the conversation so far, this one last."""
        prompts = [interaction.request.event.prompt for interaction in session.get_interactions()]
        await handler.emit_text_block(FINAL_RESPONSE, " | ".join([*prompts, f"echo-history:{argument}"]))
        await handler.complete()

    async def _error(self, session: Session, argument, handler: ResponseHandler) -> None:
        """An error of the agent's own, and no answer."""
        await handler.emit_error("the lookup service is down", error_code=502, details={"service": "lookup"})
        await handler.complete()

    async def _resumed(self, session: Session, answer, handler: ResponseHandler) -> None:
        """A pause answered: the answer and the state it kept, as text."""
        resumed = session.resumed
        assert resumed is not None
        await handler.emit_text_block(FINAL_RESPONSE, f"You chose {answer} (step {resumed.state['step']}).")
        await handler.complete()


# An agent served by a2a-sdk itself, a framework that is not ours (tests/orchestration/test_a2a_agent.py):
# `python -m uvicorn tests.server.a2a_agents:sdk_app --factory`. Its prompt picks what it does.
# What it was told to cancel it writes to the file A2A_TEST_MARKS names.

MARKS = "A2A_TEST_MARKS"


class SdkExecutor(AgentExecutor):
    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        prompt = context.get_user_input()
        task = context.current_task
        if prompt == "message":  # a message-only agent: one Message, no task
            await event_queue.enqueue_event(new_text_message("Just a message.", context_id=context.context_id))
            return
        if task is None:
            task = new_task_from_user_message(context.message)
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        if task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED:
            await updater.add_artifact([new_text_part(f"Booked for {prompt}.")], name="booking", last_chunk=True)
            await updater.complete()
            return
        behaviour, _, argument = prompt.partition(":")
        if behaviour == "hello":
            await updater.start_work(updater.new_agent_message([new_text_part("Looking it up.")]))
            await updater.add_artifact([new_text_part("Hel")], artifact_id="a1", name="answer", last_chunk=False)
            await updater.add_artifact([new_text_part("lo!")], artifact_id="a1", append=True, last_chunk=True)
            await updater.add_artifact([new_data_part({"city": "Oslo"})], name="facts", last_chunk=True)
            await updater.complete()
        elif behaviour == "gate":  # the first chunk, then nothing until the file `argument` exists
            await updater.add_artifact([new_text_part("first ")], artifact_id="g", name="answer", last_chunk=False)
            for _ in range(1000):  # at most 10 s
                if os.path.exists(argument):
                    break
                await asyncio.sleep(0.01)
            await updater.add_artifact([new_text_part("second")], artifact_id="g", append=True, last_chunk=True)
            await updater.complete()
        elif behaviour == "ask":
            question = updater.new_agent_message([new_text_part("Which day?")])
            await updater.requires_input(question)
        elif behaviour == "fail":
            await updater.failed(updater.new_agent_message([new_text_part("No such city.")]))
        elif behaviour == "slow":
            for index in range(100):
                await updater.add_artifact(
                    [new_text_part(f"w{index} ")], artifact_id="s", name="answer", append=index > 0, last_chunk=False
                )
                await asyncio.sleep(0.1)
            await updater.complete()
        else:
            await updater.add_artifact([new_text_part(f"You said {prompt}.")], name="answer", last_chunk=True)
            await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        path = os.environ.get(MARKS)
        if path:
            with open(path, "a", encoding="utf-8") as marks:
                marks.write(f"canceled {context.task_id}\n")
        await TaskUpdater(event_queue, context.task_id or "", context.context_id or "").cancel()


def sdk_app() -> Starlette:
    """The agent above as a2a-sdk serves it: its card and JSON-RPC routes, in a Starlette app."""
    port = os.environ.get("A2A_TEST_PORT", "0")
    card = AgentCard(
        name="sdk-travel",
        description="Books trips (an agent served by a2a-sdk).",
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(url=f"http://127.0.0.1:{port}/", protocol_binding="JSONRPC", protocol_version="1.0")
        ],
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="book", name="book", description="Books trips", tags=["travel"])],
    )
    handler = DefaultRequestHandler(SdkExecutor(), InMemoryTaskStore(), card)
    routes = [
        *create_agent_card_routes(card),
        *create_jsonrpc_routes(handler, "/"),
        Route("/healthz", lambda request: PlainTextResponse("ok")),
    ]
    return Starlette(routes=routes)


def a2a_host() -> HostAgent:
    """A host that hands every question to the A2A agent at A2A_REMOTE_URL (named `remote`)."""
    remote = A2AAgent(os.environ["A2A_REMOTE_URL"], name="remote")
    return HostAgent(model=handing_off("remote"), specialists=[Specialist(remote, "Books trips")])
