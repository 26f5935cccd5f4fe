"""A2AAgent: an agent served over A2A (ADK, LangGraph, Pydantic AI, another service of ours...) as
an agent here, usable wherever one is: `Specialist`, `call_agent`, broadcast, `Agent(...).run`.

    remote = A2AAgent("https://agents.example.com/travel")   # its card: <url>/.well-known/agent-card.json
    host = HostAgent(model, [Specialist(remote, "Books trips")])

Each run sends the query as one A2A message (a2a-sdk's client, streaming when the card says the
agent streams) and turns what comes back into our events as it comes (docs/a2a.md, "Calling an
A2A agent"): text artifacts stream as text streams (an artifact of ours keeps its event name;
any other is FINAL_RESPONSE), data artifacts as JSON documents, `working` status messages as
STATUS text blocks, `input-required` as ASK_USER (answered, it resumes the remote task), and a
task that failed, was rejected or canceled, a refused call or a connection lost as an `error`
event, never an exception. A run that is stopped (its client left) cancels the remote task.

The conversation: each run's message carries the chat's id as its A2A `contextId`, so a remote
agent that keeps its contexts' conversations (as A2A agents do) sees the chat's earlier turns.
"""

from __future__ import annotations

import asyncio
import logging
import re
import uuid
from collections.abc import Generator, Mapping
from typing import Any
from urllib.parse import urlsplit

import httpx

from sentient_assist.facade.transport import without_credentials
from sentient_assist.protocol import conventions as names
from sentient_assist.protocol.request import Query
from sentient_assist.runtime.agent import AbstractAgent
from sentient_assist.runtime.response_handler import ResponseHandler
from sentient_assist.runtime.session import Session
from sentient_assist.runtime.text_stream import StreamEventEmitter
from sentient_assist.tracing import current_tracing

try:
    from a2a.client import A2ACardResolver, Client, ClientConfig, ClientFactory
    from a2a.helpers import get_data_parts, get_text_parts
    from a2a.types.a2a_pb2 import (
        AgentCard,
        Artifact,
        CancelTaskRequest,
        Message,
        Part,
        Role,
        SendMessageRequest,
        StreamResponse,
        TaskState,
        TaskStatus,
    )
    from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH
    from a2a.utils.errors import A2AError
    from google.protobuf.json_format import MessageToDict, ParseError
except ImportError as missing:  # pragma: no cover - the extra's absence is tested by its message
    raise ImportError(f"A2AAgent needs a2a-sdk 1.x: pip install 'sentient-assist[a2a]' ({missing})") from None

DEFAULT_TIMEOUT = 300.0
CANCEL_TIMEOUT = 5.0  # for the remote task's cancel when a run is stopped
REMOTE_FAILED = 502  # the code of our error events for what the remote agent did
STATUS = "STATUS"  # the event name of a `working` status message's text
ARTIFACT = "A2A_ARTIFACT"  # of a data artifact whose name is not an event name of ours
_EVENT_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{0,63}")
_OURS = "sentient_assist"  # the metadata key our server keeps a pause's token under (server/a2a)

logger = logging.getLogger("sentient_assist.orchestration")


class _KeyForOrigin(httpx.Auth):
    """The bearer key on the requests to one origin (scheme, host and port), none elsewhere."""

    def __init__(self, key: str, url: str) -> None:
        self._header = f"Bearer {key}"
        self._origin = httpx.URL(url).copy_with(path="/", query=None, fragment=None, username=None, password=None)

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        url = request.url
        if (url.scheme, url.host, url.port) == (self._origin.scheme, self._origin.host, self._origin.port):
            request.headers["Authorization"] = self._header
        yield request


class A2AAgent(AbstractAgent):
    """The A2A agent at `url` (the base its card is found under, or the card's own URL).

    `name` is what it goes by here (its events' source, a host's tool name): by default the
    URL's host, or its card's name with `await A2AAgent.connect(url)`. `api_key` is sent as a
    bearer key to `url`'s origin only: a card naming another origin gets no key (a card is the
    remote's to write); `headers`, if given, with every request. `timeout`: seconds the stream may be
    silent before the run fails."""

    def __init__(
        self,
        url: str,
        *,
        name: str | None = None,
        description: str = "",
        api_key: str | None = None,
        headers: dict[str, str] | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"A2AAgent(url) takes the http(s) URL of an A2A agent, got {url!r}")
        self.url = url
        self._shown_url = without_credentials(url)  # for messages: never a user:password@
        super().__init__(name or urlsplit(self._shown_url).netloc)
        self.description = description
        self._headers = dict(headers or {})
        self._auth = _KeyForOrigin(api_key, url) if api_key else None
        self._timeout = httpx.Timeout(10.0, read=timeout)
        self._card: AgentCard | None = None
        self._card_lock = asyncio.Lock()

    @classmethod
    async def connect(cls, url: str, **options: Any) -> A2AAgent:
        """An A2AAgent named and described by its card (read now): `options` as A2AAgent()'s."""
        agent = cls(url, **options)
        card = await agent.card()
        if "name" not in options and card.name:
            agent.name = card.name
        if not options.get("description"):
            agent.description = card.description
        return agent

    async def card(self) -> AgentCard:
        """The agent's card, read once from its URL (a2a-sdk's resolver)."""
        async with self._card_lock:
            if self._card is None:
                base, card_path = self._card_location()
                async with self._http() as http:
                    self._card = await A2ACardResolver(http, base, card_path).get_agent_card()
            return self._card

    def _card_location(self) -> tuple[str, str]:
        parts = urlsplit(self.url)
        if parts.path.endswith(".json"):
            base, _, path = self.url.rpartition("/")
            return base, path
        return self.url, AGENT_CARD_WELL_KNOWN_PATH

    def _http(self) -> httpx.AsyncClient:
        headers = self._headers
        if current_tracing() is not None:
            # The remote agent's spans (a framework that traces) join this run's trace.
            from sentient_assist.runtime.tracing import inject_current

            headers = dict(headers)
            inject_current(headers)
        return httpx.AsyncClient(timeout=self._timeout, headers=headers, auth=self._auth)

    async def assist(self, session: Session, query: Query, response_handler: ResponseHandler) -> None:
        resumed = session.resumed
        state = resumed.state if resumed is not None else None
        a2a_state = state.get("a2a") if isinstance(state, dict) else None
        message = Message(role=Role.ROLE_USER, message_id=str(uuid.uuid4()), parts=[Part(text=query.prompt)])
        if isinstance(a2a_state, dict) and isinstance(a2a_state.get("task_id"), str):
            # The answer to the remote agent's question: a message on the task that asked.
            message.task_id = a2a_state["task_id"]
            message.context_id = str(a2a_state.get("context_id") or "")
        else:
            message.context_id = str(session.activity_id)
        reader = _RemoteAnswer(self, response_handler)
        try:
            card = await self.card()
            async with self._http() as http:
                client = ClientFactory(ClientConfig(httpx_client=http, streaming=True)).create(card)
                try:
                    async for response in client.send_message(SendMessageRequest(message=message)):
                        await reader.read(response)
                        if reader.finished:
                            break
                except asyncio.CancelledError:
                    await _cancel_quietly(client, reader.task_id)
                    raise
        except (A2AError, httpx.HTTPError, ValueError, ParseError) as failure:  # ValueError: JSON, or no transport
            await reader.failed(self._failure(failure))
            return
        await reader.end()

    def _failure(self, failure: Exception) -> str:
        if isinstance(failure, httpx.HTTPError):
            return f"the A2A agent at {self._shown_url} could not be reached ({type(failure).__name__})"
        return f"the A2A agent at {self._shown_url} failed: {_one_line(str(failure)) or type(failure).__name__}"


async def _cancel_quietly(client: Client, task_id: str) -> None:
    """Cancel the remote task of a run that was stopped; what it answers does not matter."""
    if not task_id:
        return
    try:
        async with asyncio.timeout(CANCEL_TIMEOUT):
            await asyncio.shield(client.cancel_task(CancelTaskRequest(id=task_id)))
    except (Exception, asyncio.CancelledError):
        logger.info("the remote A2A task %s could not be canceled", task_id)


class _RemoteAnswer:
    """One run's StreamResponses, read into our events on `handler`."""

    def __init__(self, agent: A2AAgent, handler: ResponseHandler) -> None:
        self.agent = agent
        self.handler = handler
        self.task_id = ""
        self.context_id = ""
        self.finished = False
        self.answered = False  # text of an answer was sent
        self.errored = False  # an error event was sent
        self._streams: dict[str, StreamEventEmitter] = {}
        self._artifacts_seen: set[str] = set()

    async def read(self, response: StreamResponse) -> None:
        kind = response.WhichOneof("payload")
        if kind == "message":
            await self._message(response.message)
            self.finished = True
        elif kind == "task":
            task = response.task
            self.task_id, self.context_id = task.id, task.context_id
            for artifact in task.artifacts:  # a whole task (not streamed): its artifacts at once
                if artifact.artifact_id not in self._artifacts_seen:
                    await self._artifact(artifact, append=False, last=True)
            await self._status(task.status)
        elif kind == "artifact_update":
            chunk = response.artifact_update
            self.task_id = self.task_id or chunk.task_id
            await self._artifact(chunk.artifact, append=chunk.append, last=chunk.last_chunk)
        elif kind == "status_update":
            update = response.status_update
            self.task_id, self.context_id = update.task_id or self.task_id, update.context_id or self.context_id
            await self._status(update.status)

    async def _message(self, message: Message) -> None:
        text = "".join(get_text_parts(message.parts))
        if text:
            self.answered = True
            await self.handler.emit_text_block(names.FINAL_RESPONSE, text)
        for data in get_data_parts(message.parts):
            await self._document(ARTIFACT, data)

    async def _artifact(self, artifact: Artifact, *, append: bool, last: bool) -> None:
        self._artifacts_seen.add(artifact.artifact_id)
        metadata = MessageToDict(artifact.metadata) if artifact.HasField("metadata") else {}
        ours = metadata.get("event_name")
        name = ours if isinstance(ours, str) and _EVENT_NAME.fullmatch(ours) else None
        if name == "error":  # an error event of our own server
            for data in get_data_parts(artifact.parts):
                if isinstance(data, dict):
                    await self._error(data)
            return
        text = "".join(get_text_parts(artifact.parts))
        stream = self._streams.get(artifact.artifact_id)
        if text or stream is not None or not artifact.parts:
            if stream is None:
                stream = self.handler.create_text_stream(name or names.FINAL_RESPONSE)
                self._streams[artifact.artifact_id] = stream
            if text:
                if (name or names.FINAL_RESPONSE) == names.FINAL_RESPONSE:
                    self.answered = True
                await stream.emit_chunk(text)
            if last:
                await stream.complete()
                del self._streams[artifact.artifact_id]
        for data in get_data_parts(artifact.parts):
            await self._document(name or ARTIFACT, data if name else {"name": artifact.name, "data": data})

    async def _document(self, name: str, data: object) -> None:
        await self.handler.emit_json(name, data if isinstance(data, dict) else {"data": data})

    async def _error(self, data: Mapping[str, object]) -> None:
        self.errored = True
        message = data.get("error_message")
        code = data.get("error_code")
        details = data.get("details")
        await self.handler.emit_error(
            message if isinstance(message, str) else "the remote agent sent an error",
            int(code) if isinstance(code, int | float) and not isinstance(code, bool) else REMOTE_FAILED,
            details if isinstance(details, dict) else None,
        )

    async def _status(self, status: TaskStatus) -> None:
        state = status.state
        text = "\n".join(get_text_parts(status.message.parts)) if status.HasField("message") else ""
        if state == TaskState.TASK_STATE_WORKING or state == TaskState.TASK_STATE_SUBMITTED:
            if text:
                await self.handler.emit_text_block(STATUS, text)
            return
        self.finished = True
        if state == TaskState.TASK_STATE_COMPLETED:
            if text and not self.answered:
                self.answered = True
                await self.handler.emit_text_block(names.FINAL_RESPONSE, text)
            return
        if state == TaskState.TASK_STATE_INPUT_REQUIRED:
            await self._close_streams()
            state_of_task = {"a2a": {"task_id": self.task_id, "context_id": self.context_id}}
            question, choices = _question(status.message, text) if status.HasField("message") else (text, [])
            await self.handler.ask_user(
                question or "The agent needs your answer.", choices=choices, state=state_of_task
            )
            return
        if self.errored and state == TaskState.TASK_STATE_FAILED:
            return  # its error came already, as an event of its own
        code = _error_code(status.message) if status.HasField("message") else REMOTE_FAILED
        what = {
            TaskState.TASK_STATE_FAILED: "failed",
            TaskState.TASK_STATE_REJECTED: "rejected the task",
            TaskState.TASK_STATE_CANCELED: "canceled the task",
            TaskState.TASK_STATE_AUTH_REQUIRED: "needs an authorization this call does not have",
        }.get(state, f"ended in state {TaskState.Name(state)}")
        message = text or f"the A2A agent {self.agent.name} {what}"
        await self.handler.emit_error(message, code, {"a2a_state": TaskState.Name(state), "task_id": self.task_id})

    async def _close_streams(self) -> None:
        streams, self._streams = self._streams, {}
        for stream in streams.values():
            await stream.complete()

    async def failed(self, message: str) -> None:
        if self.handler.is_complete:
            return
        await self._close_streams()
        await self.handler.emit_error(message, REMOTE_FAILED, {"task_id": self.task_id} if self.task_id else None)
        await self.handler.complete()

    async def end(self) -> None:
        if self.handler.is_complete:
            return  # ask_user ended the response
        await self._close_streams()
        if not self.finished:
            await self.handler.emit_error(
                f"the A2A agent {self.agent.name}'s stream ended before its task did", REMOTE_FAILED
            )
        await self.handler.complete()


def _question(message: Message, text: str) -> tuple[str, list[str]]:
    """The question and choices of a pause: as our own server sends them (its data part, the
    agent's own payload), else the message's text."""
    for data in get_data_parts(message.parts):
        if not isinstance(data, dict) or not isinstance(data.get("question"), str) or not data["question"]:
            continue
        question: str = data["question"]
        choices = data.get("choices")
        if isinstance(choices, list) and all(isinstance(choice, str) for choice in choices):
            return question, list(choices)
        return question, []
    return text, []


def _error_code(message: Message) -> int:
    """The error code our own server keeps in a failed task's message, else REMOTE_FAILED."""
    ours = MessageToDict(message.metadata).get(_OURS) if message.HasField("metadata") else None
    code = ours.get("error_code") if isinstance(ours, dict) else None
    return int(code) if isinstance(code, int | float) and not isinstance(code, bool) else REMOTE_FAILED


def _one_line(text: str) -> str:
    return " ".join(text.split())[:300]
