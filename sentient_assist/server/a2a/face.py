"""The served agent as an A2A agent: its card at `GET /.well-known/agent-card.json`, JSON-RPC at
`POST /a2a` (docs/a2a.md).

    request -> the app's middleware -> FastAPI's router -> A2ARoute: the key (401), the body's
    declared size (413), a place under ASSIST_MAX_STREAMS (503), as for /assist; the body, read
    bounded in size and time (413, 408) -> `A2AFace.endpoint` -> a2a-sdk's JsonRpcDispatcher and
    DefaultRequestHandler (A2A 1.0's SendMessage, SendStreamingMessage, GetTask, ListTasks,
    CancelTask, SubscribeToTask; 0.3's message/send, message/stream, tasks/get, tasks/cancel, ...
    through the SDK's compatibility layer) -> AgentRunExecutor: the same Run as /assist's, its
    events as task updates (answer.py)

It is the same service as /assist, not a second one: the same `Service`'s keys, stream
budget (every POST holds a place while it is answered, and until the run it started ends: a run
whose client left goes on, as A2A tasks outlive their connections), body limits, time limit (a
request is answered within it and WRITE_GRACE_SECONDS, or cut off), pause sealer and shutdown
grace. Refusals before
the SDK sees the request are JSON-RPC errors (`id: null`) with the HTTP status and headers
/assist would answer with. The card is public, as A2A has it: it names the bearer scheme when
ASSIST_API_KEYS is set, and every call needs a key then.

Tasks are kept where every replica finds them when the service has a Redis (stores.py), and a
task's next message is answered by whichever replica it reaches: the conversation is read back
from the task (conversation.py), its pause checked by its sealed token. SubscribeToTask on a
replica that does not run the task follows it through Redis as well (task_events.py).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from a2a.server.cluster import TaskEventStream, VersionedTaskStore
from a2a.server.context import ServerCallContext
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.server.routes import DefaultServerCallContextBuilder
from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher
from a2a.server.tasks import TaskStore
from a2a.types.a2a_pb2 import ListTasksRequest, ListTasksResponse
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH
from a2a.utils.errors import UnsupportedOperationError
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from starlette.responses import Response

from sentient_assist.server.a2a.card import agent_card
from sentient_assist.server.a2a.executor import STATE_REQUEST_ID, AgentRunExecutor
from sentient_assist.server.a2a.stores import BoundedTaskStore, KeyUser, RedisTaskStore, owner_of
from sentient_assist.server.admission import STATE_PLACE, WRITE_GRACE_SECONDS, place_of
from sentient_assist.server.json_shape import check_json_shape
from sentient_assist.server.jsonrpc import JsonRpcFace
from sentient_assist.server.request_id import request_id_of
from sentient_assist.server.routes import get_and_head
from sentient_assist.server.service import Service

A2A_PATH = "/a2a"
CARD_CACHE_CONTROL = "public, max-age=300"
CARD_PATH = AGENT_CARD_WELL_KNOWN_PATH
# A task waiting for input is let go from this process after this long (its state is in the
# store: the next message takes it up again, here or on another replica). Without it, every
# paused task would hold the SDK's background tasks for as long as the process runs.
PARKED_TASK_SECONDS = 10.0
NO_LISTING = "ListTasks needs keys (ASSIST_API_KEYS): without them every client would see every other's tasks"

logger = logging.getLogger("sentient_assist.server")

_JSONRPC = {"content": {"application/json": {"schema": {"type": "object"}}}}
RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "The JSON-RPC answer: `application/json`, or for SendStreamingMessage and "
        "SubscribeToTask Server-Sent Events, one JSON-RPC response (a StreamResponse) per `data:` line.",
    },
    401: {
        "description": "ASSIST_API_KEYS is set and the request has no valid `Authorization: Bearer` key.",
        **_JSONRPC,
    },
    408: {"description": "The body did not arrive in full within ASSIST_BODY_TIMEOUT seconds.", **_JSONRPC},
    413: {"description": "The body is larger than ASSIST_MAX_BODY_BYTES.", **_JSONRPC},
    503: {"description": "At ASSIST_MAX_STREAMS (every face counts), or shutting down; see `Retry-After`.", **_JSONRPC},
}


class CallContextBuilder(DefaultServerCallContextBuilder):
    """The SDK's call context, with the caller's key as its user (a client sees its own key's
    tasks), the request's runs and id, and no Authorization header among its headers."""

    def __init__(self, with_keys: bool) -> None:
        self.with_keys = with_keys

    def build(self, request: Request) -> ServerCallContext:
        context = super().build(request)
        headers = context.state.get("headers")
        if isinstance(headers, dict):
            headers.pop("authorization", None)
        context.user = KeyUser(owner_of(request.headers.get("authorization")) if self.with_keys else "")
        context.state[STATE_PLACE] = place_of(request.scope)
        context.state[STATE_REQUEST_ID] = request_id_of(request)
        return context


class TaskHandler(DefaultRequestHandler):
    """a2a-sdk's handler of the A2A methods, but for ListTasks on a service without keys: every
    client is then one owner, and a list would show one client another's prompts and answers.
    A task's own id (GetTask, SubscribeToTask) is random, and only its client knows it."""

    def __init__(self, *args: Any, with_keys: bool, **options: Any) -> None:
        super().__init__(*args, **options)
        self.with_keys = with_keys

    async def on_list_tasks(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        if not self.with_keys:
            raise UnsupportedOperationError(NO_LISTING)
        page: ListTasksResponse = await super().on_list_tasks(params, context)
        return page


class A2AFace(JsonRpcFace):
    """The agent card and `POST {path}` for the agent of a service, under its limits."""

    title = "A2A"

    def __init__(self, service: Service, path: str = A2A_PATH) -> None:
        super().__init__(service)
        settings = service.settings
        self.path = path
        self.public_url = settings.public_url.rstrip("/") if settings.public_url else None
        self.redis: Any = None
        self.followers: Any = None
        store: TaskStore | VersionedTaskStore
        events: TaskEventStream | None = None
        max_tasks, max_bytes = settings.a2a_max_tasks_per_key, settings.a2a_max_task_bytes_per_key
        if settings.redis_url is not None:
            import redis.asyncio

            from sentient_assist.server.a2a.task_events import RedisTaskEventStream
            from sentient_assist.server.redis_readers import readers_client

            url = settings.redis_url.get_secret_value()
            self.redis = redis.asyncio.from_url(url)
            self.followers = readers_client(url)
            store = RedisTaskStore(
                self.redis, settings.resume_ttl, max_tasks_per_key=max_tasks, max_bytes_per_key=max_bytes
            )
            events = RedisTaskEventStream(store, self.followers)
        else:
            store = BoundedTaskStore(settings.resume_ttl, max_tasks_per_key=max_tasks, max_bytes_per_key=max_bytes)
        self.store = store
        with_keys = bool(service.keys)
        self.executor = AgentRunExecutor(service, store)
        # The handler reads the card for what the agent can do (streaming); its URL is the card route's to say.
        self.handler = TaskHandler(
            self.executor,
            store,
            agent_card(self.agent, path, with_keys=with_keys),
            interrupted_task_timeout=PARKED_TASK_SECONDS,
            event_stream=events,  # with Redis: SubscribeToTask follows a task running on another replica
            with_keys=with_keys,
        )
        self.dispatcher = JsonRpcDispatcher(
            self.handler,
            context_builder=CallContextBuilder(with_keys),
            enable_v0_3_compat=True,
            # A stream lasts through the shutdown grace its run gets (then it ends with the run's 503).
            shutdown_grace_period=settings.shutdown_grace + WRITE_GRACE_SECONDS,
        )

    def router(self, path: str | None = None) -> APIRouter:
        """A router holding the card's route and POST `path`; its lifespan closes the SDK's
        handler (and the Redis connection) at shutdown."""
        router = APIRouter(lifespan=self._lifespan, tags=["A2A"])
        # GET and HEAD, as every GET route of the service (sentient_assist/server/routes.py).
        get_and_head(
            router, CARD_PATH, self.card, name="a2a_agent_card", summary="The agent's A2A card (public, as A2A has it)"
        )
        self.add_route(
            router,
            self.path,
            self.endpoint,
            name="a2a",
            summary="The agent as an A2A agent (JSON-RPC 2.0; A2A 1.0, and 0.3's method names)",
            response_class=JSONResponse,
            responses=RESPONSES,
        )
        return router

    @asynccontextmanager
    async def _lifespan(self, app: Any) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await self.handler.aclose()
            if self.redis is not None:
                await self.redis.aclose()
                await self.followers.aclose()

    async def card(self, request: Request) -> JSONResponse:
        """The agent card: its name, description and skill, and its JSON-RPC URL."""
        path = request.url.path
        prefix = path[: -len(CARD_PATH)] if path.endswith(CARD_PATH) else ""
        card = agent_card(self.agent, self._base(request) + prefix + self.path, with_keys=bool(self.service.keys))
        # The same card for every caller (nothing of the request's headers is in it): cacheable.
        return JSONResponse(agent_card_to_dict(card), headers={"Cache-Control": CARD_CACHE_CONTROL})

    def _base(self, request: Request) -> str:
        """Where clients reach the service: ASSIST_PUBLIC_URL; unset, the address the server
        listens on (the connection's own), never the request's `Host`, which a client writes."""
        if self.public_url:
            return self.public_url
        server = request.scope.get("server") or ("127.0.0.1", 80)
        host, port = server[0], server[1]
        host = f"[{host}]" if ":" in host else host
        return f"{request.url.scheme}://{host}:{port}"

    async def endpoint(self, request: Request) -> Response:
        """A JSON-RPC request of A2A, answered by a2a-sdk (docs/a2a.md), once its shape is within
        what the SDK's pure Python parsing may cost (server/json_shape.py)."""
        check_json_shape(await request.body())
        return await self.dispatcher.handle_requests(request)
