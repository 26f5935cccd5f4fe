"""The served agent as an MCP server: `POST /mcp`, streamable HTTP, stateless, one tool.

    request -> the app's middleware -> FastAPI's router -> the admitted route (server/admission.py):
    the key (401), a place under ASSIST_MAX_STREAMS (503), the body read whole, bounded in size
    and time (413, 408) -> FastAPI runs the dependencies -> `MCPFace.endpoint` -> MCPExchange
    -> the mcp SDK's StreamableHTTPSessionManager, stateless -> `call_tool`:
    the same Run as /assist's, its events read by sentient_assist/server/mcp/tool.py -> one
    CallToolResult, and a progress notification per event on the way when the call asked
    (a `progressToken` in its `_meta`)

It is the same service as /assist, not a second one: the same `Service`'s keys, stream
budget (every POST to /mcp holds a place while it is answered; only tools/call holds it long),
body limits, time limit (an `isError` result), pause sealer and shutdown grace. Refusals before
the SDK sees the request are JSON-RPC errors (`id: null`) with the HTTP status and headers
/assist would answer with; GET and DELETE are 405s: stateless, there is no session to stream
to or to end.

Stateless, any replica answers any request: the SDK makes a transport per request, and the
protocol's both eras are served (the 2025 handshake, `initialize` first, and 2026-07-28's
self-contained requests). A call is cancelled when its client leaves (closes the request, as
a 2026-07-28 client does to cancel); a 2025 client's `notifications/cancelled` comes as a POST
of its own, which no session ties to the call: it is honoured only when keys are set, for the
calls made with the same key and request id in this process (without keys, anyone could
cancel anyone's call by guessing a small id).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import mcp_types as types
from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import JSONResponse
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.server.session import ServerSession
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.exceptions import MCPError
from starlette.datastructures import Headers
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from sentient_assist.runtime.errors import InputError
from sentient_assist.runtime.run import Run, RunOutcome
from sentient_assist.runtime.run_input import RunInput
from sentient_assist.server import metrics
from sentient_assist.server.admission import WRITE_GRACE_SECONDS, Replayed, caller_of, forget_body
from sentient_assist.server.auth import bearer_token
from sentient_assist.server.event_stream import survive_cut_off
from sentient_assist.server.jsonrpc import JsonRpcFace, jsonrpc_refusal
from sentient_assist.server.mcp.drain import streams_drained_after
from sentient_assist.server.mcp.tool import (
    AnswerHook,
    Note,
    ToolAnswer,
    ToolCall,
    agent_tool,
    check_call_shape,
    merged,
    progress_message,
    refusal,
)
from sentient_assist.server.service import Service
from sentient_assist.version import __version__

MCP_PATH = "/mcp"
CANCELLED = b'"notifications/cancelled"'

logger = logging.getLogger("sentient_assist.server")

_JSONRPC_ERROR = {"content": {"application/json": {"schema": {"type": "object"}}}}
RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "The JSON-RPC answer: `application/json`, or Server-Sent Events (`text/event-stream`) "
        "carrying the progress notifications and then the answer.",
    },
    # The SDK's own refusals of a request MCP's transport does not allow, as JSON-RPC errors.
    400: {"description": "Not a JSON-RPC message the MCP transport takes (no body, bad JSON, a bad version)."},
    406: {"description": "`Accept` does not name both `application/json` and `text/event-stream`."},
    415: {"description": "`Content-Type` is not `application/json`."},
    401: {"description": "ASSIST_API_KEYS is set and the request has no valid `Authorization: Bearer` key."},
    408: {"description": "The body did not arrive in full within ASSIST_BODY_TIMEOUT seconds."},
    413: {"description": "The body is larger than ASSIST_MAX_BODY_BYTES."},
    503: {"description": "At ASSIST_MAX_STREAMS (every face counts), or shutting down; see `Retry-After`."},
}
for _status in (400, 401, 406, 408, 413, 415, 503):
    RESPONSES[_status].update(_JSONRPC_ERROR)


class MCPFace(JsonRpcFace):
    """POST /mcp for the agent of a service, under its limits: an MCP server with one tool."""

    title = "MCP"

    def __init__(self, service: Service) -> None:
        super().__init__(service)
        self.tool = agent_tool(self.agent)
        self.server: Server[Any] = Server(
            self.agent.name,
            version=__version__,
            description=self.agent.description or None,
            on_list_tools=self.list_tools,
            on_call_tool=self.call_tool,
            get_tool_input_schema=self._input_schema,
        )
        self._manager: StreamableHTTPSessionManager | None = None
        # The calls a 2025 client's notifications/cancelled may end: by key and request id.
        self._calls: dict[tuple[str, str], list[Run[Note | None]]] = {}

    def router(self, path: str = MCP_PATH) -> APIRouter:
        """A router holding POST `path`; its lifespan runs the SDK's session manager (FastAPI
        merges it into the app's when the router is included)."""
        router = APIRouter(lifespan=self._lifespan, tags=["MCP"])
        self.add_route(
            router,
            path,
            self.endpoint,
            name="mcp",
            summary="The agent as an MCP server (streamable HTTP, stateless): one tool, the agent",
            response_class=JSONResponse,
            responses=RESPONSES,
        )
        return router

    @asynccontextmanager
    async def _lifespan(self, app: Any) -> AsyncIterator[None]:
        # A manager runs once: each start of the app makes its own.
        manager = StreamableHTTPSessionManager(
            self.server, stateless=True, max_request_body_size=max(self.service.max_body_bytes, 1)
        )
        # A call in flight at SIGTERM gets the shutdown grace and the time to send its answer.
        grace = self.service.streams.grace + WRITE_GRACE_SECONDS
        async with manager.run(), streams_drained_after(grace):
            self._manager = manager
            try:
                yield
            finally:
                self._manager = None

    async def endpoint(self, request: Request) -> Response:
        """A JSON-RPC message of MCP, answered by the SDK (docs/mcp.md, "The agent as an MCP server")."""
        body = await request.body()
        check_call_shape(body)  # what the SDK would hold for the call, bounded before it parses
        forget_body(request)  # the exchange holds it, till the SDK has read it
        return MCPExchange(self, body)

    async def list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[self.tool])

    def _input_schema(self, name: str) -> dict[str, Any] | None:
        return self.tool.input_schema if name == self.tool.name else None

    async def call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        """The agent's answer to the call's prompt, as the tool's result."""
        if params.name != self.tool.name:
            raise MCPError(
                types.INVALID_PARAMS, f"Unknown tool {params.name!r}: this server has one, {self.tool.name!r}"
            )
        request = ctx.request
        if not isinstance(request, Request):  # only this face's HTTP requests reach here
            raise MCPError(types.INTERNAL_ERROR, "the call did not come over HTTP")
        agent = self.agent
        try:
            call = ToolCall(params.arguments, agent.name)
            self.service.histories.hold(call.history)  # ASSIST_MAX_HISTORY_BYTES_TOTAL, as /assist's
            _let_go(params.arguments)
        except InputError as bad:
            return refusal(bad.message, bad.status)
        except HTTPException as refused:
            return refusal(str(refused.detail), refused.status_code)
        stats = self.run_stats(request)
        answer = ToolAnswer(self.tool.name, call)
        run: Run[Note | None] = Run(
            agent,
            call.session,
            call.query,
            watcher=self.service.streams,
            stats=stats,
            make_hook=lambda channel, run_stats: AnswerHook(channel, run_stats, answer),
            sealer=self.service.sealer,
            run_input=RunInput(caller=caller_of(request.scope)),
        )
        del call  # the run holds the session and the query
        progress = ctx.session if ctx.meta is not None and "progress_token" in ctx.meta else None
        tracked = self._track(run, request, ctx.request_id)
        try:
            await _read(run, answer, progress)
        except asyncio.CancelledError:
            if not run.cut_off:
                raise  # the client left, or the SDK ends the request
            survive_cut_off("MCP call", stats.request_id, request.scope)  # nobody takes the answer
        finally:
            self._untrack(tracked, run)
            run.reader_left()
            metrics.observe_stream(stats)
        return answer.result()

    def _track(
        self, run: Run[Note | None], request: Request, request_id: types.RequestId | None
    ) -> tuple[str, str] | None:
        if not self.service.keys or request_id is None:
            return None
        key = (bearer_token(request.headers.get("authorization")), str(request_id))
        self._calls.setdefault(key, []).append(run)
        return key

    def _untrack(self, key: tuple[str, str] | None, run: Run[Note | None]) -> None:
        if key is None:
            return
        runs = self._calls.get(key, [])
        if run in runs:
            runs.remove(run)
        if not runs:
            self._calls.pop(key, None)

    def cancel_calls(self, authorization: str, body: bytes) -> None:
        """A 2025 client's `notifications/cancelled`: the calls it names, made with the same key
        in this process, end now (as when their clients leave)."""
        try:
            message = json.loads(body)
        except ValueError:
            return
        if not isinstance(message, dict) or message.get("method") != "notifications/cancelled":
            return
        params = message.get("params")
        request_id = params.get("requestId") if isinstance(params, dict) else None
        if isinstance(request_id, bool) or not isinstance(request_id, str | int):
            return
        for run in list(self._calls.get((bearer_token(authorization), str(request_id)), ())):
            logger.info("MCP call cancelled by its client (request %s)", run.stats.request_id)
            run.stop(outcome=RunOutcome.DISCONNECTED)


async def _read(run: Run[Note | None], answer: ToolAnswer, progress: ServerSession | None) -> None:
    """Read the run to its end into `answer`, and send its notes as progress notifications
    when the call asked for them: all that is ready together, each run of text in one."""
    sent = 0
    async for batch in run.batches():  # no keepalive of ours: the SDK pings the stream itself
        if answer.too_long:  # what is kept is bounded: past it, the run ends and the result is an error
            run.end_past_bound("MCP result")
        if progress is not None:
            for note in merged(batch):
                sent += 1
                await progress.report_progress(sent, None, progress_message(note))


class MCPExchange(Response):
    """One POST of MCP, answered by the SDK's session manager with its body, read whole by the
    admitted route (within ASSIST_MAX_BODY_BYTES and ASSIST_BODY_TIMEOUT), handed to it again."""

    def __init__(self, face: MCPFace, body: bytes) -> None:
        super().__init__()
        self._face = face
        self._body = body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        face, body = self._face, self._body
        self._body = b""  # the replay below lets go of it once the SDK has read it: a call may last minutes
        unfit = _transport_refusal(Headers(scope=scope))
        if unfit is not None:  # the SDK's own answer would be plain text, not JSON-RPC
            await unfit(scope, receive, send)
            return
        manager = face._manager
        if manager is None:
            message = "the MCP face is not running: the app's lifespan has not started it"
            await jsonrpc_refusal(503, message)(scope, receive, send)
            return
        if face.service.keys and CANCELLED in body:
            face.cancel_calls(Headers(scope=scope).get("authorization", ""), body)
        replayed = Replayed(body, receive)
        del body
        await manager.handle_request(scope, replayed, send)


def _transport_refusal(headers: Headers) -> Response | None:
    """What MCP's streamable HTTP transport refuses in a POST's headers, as a JSON-RPC error
    naming the header: a 415 for `Content-Type`, a 406 for `Accept`."""
    if headers.get("content-type", "").split(";")[0].strip().lower() != "application/json":
        return jsonrpc_refusal(415, "Content-Type must be application/json for a POST to the MCP endpoint")
    accept = headers.get("accept", "")
    if "*/*" not in accept and not ("application/json" in accept and "text/event-stream" in accept):
        return jsonrpc_refusal(406, "Accept must name both application/json and text/event-stream (MCP over HTTP)")
    return None


def _let_go(arguments: dict[str, Any] | None) -> None:
    """Empty a call's arguments once read: the SDK holds its parsed message (the history's list
    shared by its raw and its validated form) until the call's answer is sent, and as Python
    objects 10,000 short turns take about 6 MB where the run keeps them in 1."""
    if arguments:
        history = arguments.get("history")
        if isinstance(history, list):
            history.clear()
        arguments.clear()
