"""MCP servers' tools for an LLMAgent, beside its functions, under Pydantic AI's names:

    from sentient_assist.llm import MCPServerStdio, MCPServerStreamableHTTP

    clock = MCPServerStdio("mcp-server-time", args=["--local-timezone", "Europe/Paris"])
    search = MCPServerStreamableHTTP("https://search.example/mcp", headers={"Authorization": "Bearer ..."})
    LLMAgent(model=..., tools=[clock, search, my_function])

It needs the extra, the official `mcp` SDK (2.x): pip install 'sentient-assist[mcp]'. This module
imports the SDK only when a server is first used (it brings a web server along: 0.7 s).

A server's tools are what it lists: names (after `tool_prefix=`, joined with "_"), descriptions
and input schemas as the model reads them, kept or left out by `include=` and `exclude=`.
A call is an ordinary tool call: the tool timeout (`timeout=`), approval (`approval=`, for all
its tools or by tool name), TOOL_CALL and TOOL_RESULT, the usage limits. Its answer: the
text, or the structured content (as JSON), for the model; pictures and resources described
to it in a line each, and whole in TOOL_RESULT; `isError` is the tool's error, which the model
reads and may recover from.

The session, one per server object per process (per event loop, strictly):
- opened on first use (the agent's first run lists the tools), and shared by every run;
- owned by one task of its own, which enters the SDK's client and leaves it: runs only send
  requests through it, so a run cancelled mid-call (its client left) cancels its request (the
  server is told) and leaves the session as it was, and no cancel scope spans two tasks;
- reopened when it ended: the server died, or the connection dropped. A call finds the
  session closed, opens another and is sent again, once; a call that was in flight when the
  server died is not sent again (it may have run), unless the server says that the tool is
  read-only or idempotent;
- closed by the service's lifespan (`create_app`), or by `await server.aclose()`, or by
  `async with server:`. A stdio server's process is the service's child: stopped when the
  session closes and, on Linux, killed by the kernel when the service dies without closing
  it (PR_SET_PDEATHSIG), so that none outlives the service.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import re
import shutil
import sys
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol, cast

from sentient_assist.extras import missing
from sentient_assist.llm.asking import Approval
from sentient_assist.llm.messages import ToolSpec
from sentient_assist.llm.tools import DEFAULT_TOOL_TIMEOUT, Tool, ToolOutcome, Toolset
from sentient_assist.protocol.events import dumps_json
from sentient_assist.protocol.json_value import JSONObject, JSONValue
from sentient_assist.tracing import current_tracing
from sentient_assist.version import __version__

if TYPE_CHECKING:
    from typing import Self

    import mcp.types as mcp_types
    from anyio import CancelScope
    from mcp import Client
    from mcp.client import Transport
    from mcp.shared.exceptions import MCPError
    from mcp.shared.message import SessionMessage

logger = logging.getLogger("sentient_assist.llm.mcp")

DEFAULT_CONNECT_TIMEOUT = 20.0  # to start a server (a Python one takes a second) and list its tools
_CLOSE_TIMEOUT = 10.0  # the SDK stops a stdio server within 6 s: stdin closed, 2 s, SIGTERM, 2 s, SIGKILL
_ENDING_TIMEOUT = 3.0  # for a dropped session's task to say why it ended
_PAGES = 100  # of a tool listing: a server that pages forever cannot hang the first run
_RESOURCE_TEXT = 4000  # characters of an embedded text resource the model reads
_CONNECTION_CLOSED = -32000  # mcp_types.CONNECTION_CLOSED: the transport closed, the request has no answer
# An HTTP server that no longer knows the session answers 404 (the spec: start a new one), with
# words that vary: "Session not found" (the Python and TypeScript SDKs' servers, under two
# codes), "Session terminated" (the Python client's, for a 404 with no JSON-RPC body).
_SESSION_GONE = re.compile(r"\bsession\b.*\b(not found|terminated|expired|unknown)\b", re.IGNORECASE)

# Run by the Python running the service, it becomes the stdio server (exec: same PID) after asking
# Linux to kill it when its parent dies: no server outlives a service killed without a shutdown.
_DIE_WITH_PARENT = (
    "import ctypes, os, signal, sys\n"
    "ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG\n"
    "if os.getppid() != int(sys.argv[1]):\n"
    "    sys.exit('the service stopped before its MCP server started')\n"
    "os.execvp(sys.argv[2], sys.argv[2:])\n"
)


def _require_sdk() -> None:
    """ImportError, naming the extra, when the mcp SDK (2.x) is not installed."""
    problem = missing("mcp", needs="the mcp package (the official SDK, 2.x)", extra="mcp", distribution="mcp", major=2)
    if problem is not None:
        raise ImportError(f"MCP servers cannot be used: {problem}")


class MCPToolset(Toolset):
    """What MCPServerStdio and MCPServerStreamableHTTP share: the tools' names and filters,
    their timeout and approval, and the session."""

    def __init__(
        self,
        *,
        tool_prefix: str | None,
        include: Iterable[str] | None,
        exclude: Iterable[str],
        approval: Approval | Mapping[str, Approval] | None,
        timeout: float,
        connect_timeout: float,
    ) -> None:
        _require_sdk()
        if tool_prefix is not None and (not isinstance(tool_prefix, str) or not tool_prefix):
            raise ValueError(f"tool_prefix= is a word put before each tool's name, got {tool_prefix!r}")
        if not timeout > 0 or not connect_timeout > 0:
            raise ValueError(f"timeout= and connect_timeout= are seconds above 0, got {timeout!r}, {connect_timeout!r}")
        if approval is not None and not isinstance(approval, Approval | Mapping):
            raise TypeError(f"approval= takes an Approval, or a dict of them by tool name; got {approval!r}")
        self.tool_prefix = tool_prefix
        self.include = _names("include", include) if include is not None else None
        self.exclude = _names("exclude", exclude)
        self.approval = approval
        self.timeout = timeout  # of each call, as a function tool's
        self.connect_timeout = connect_timeout
        self._connection: _Connection | None = None
        self._listed: tuple[MCPTool, ...] | None = None
        self._listed_from: _Connection | None = None
        self._generation = 0

    # --- as a Toolset of an LLMAgent ----------------------------------------------------

    @property
    def label(self) -> str:
        return f"{type(self).__name__}({self._describe()!r})"

    @property
    def listed(self) -> tuple[MCPTool, ...] | None:
        return self._listed

    @property
    def generation(self) -> int:
        return self._generation

    async def list_tools(self) -> tuple[MCPTool, ...]:
        """The server's tools as the agent offers them (its session opened, if it is not)."""
        await self._session()
        assert self._listed is not None
        return self._listed

    def known_names(self) -> frozenset[str] | None:
        if self.include is None:
            return None
        return frozenset(self._named(name) for name in self.include - self.exclude)

    def collides_with(self, other: Toolset) -> bool:
        if not isinstance(other, MCPToolset) or other._identity() != self._identity():
            return False
        return other.tool_prefix == self.tool_prefix and _may_share(self, other)

    # --- its session ----------------------------------------------------------------------

    async def aclose(self) -> None:
        """Close the session, if one is open (the next use opens another)."""
        connection, self._connection = self._connection, None
        if connection is not None:
            await connection.close()

    async def __aenter__(self) -> Self:
        await self.list_tools()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        await self.aclose()

    async def _session(self) -> _Connection:
        """A session that is open: this one, or a new one if it has ended (or was opened on
        an event loop that is not this one), shared by every caller while it opens."""
        loop = asyncio.get_running_loop()
        connection = self._connection
        if connection is None or connection.ended or connection.loop is not loop:
            if connection is not None and connection.loop is not loop:
                connection.abandon()
            connection = self._connection = _Connection(self, loop)
        await asyncio.shield(connection.opened)  # a run cancelled meanwhile leaves the opening to the others
        if self._listed_from is not connection:
            self._listed = self._tools_of(connection.tools)
            self._listed_from = connection
            self._generation += 1
        return connection

    def _tools_of(self, listed: Sequence[mcp_types.Tool]) -> tuple[MCPTool, ...]:
        """The listed tools kept by include=/exclude=, named with the prefix; a name in
        include=, exclude= or approval= that the server does not have is refused (a typo)."""
        have = {tool.name for tool in listed}
        named = {"include": self.include or frozenset(), "exclude": self.exclude}
        if isinstance(self.approval, Mapping):
            named["approval"] = frozenset(self.approval)
        for option, names in named.items():
            missing = sorted(names - have)
            if missing:
                raise ValueError(
                    f"{self.label}: {option}= names {', '.join(map(repr, missing))}, which the server does not "
                    f"have; it has {', '.join(map(repr, sorted(have))) or 'no tools'}"
                )
        return tuple(
            MCPTool(self, tool, self._named(tool.name), self._approval_of(tool.name))
            for tool in listed
            if (self.include is None or tool.name in self.include) and tool.name not in self.exclude
        )

    def _named(self, name: str) -> str:
        return f"{self.tool_prefix}_{name}" if self.tool_prefix else name

    def _approval_of(self, name: str) -> Approval | None:
        if isinstance(self.approval, Mapping):
            return self.approval.get(name)
        return self.approval

    async def _call(self, tool: MCPTool, arguments: Mapping[str, object]) -> ToolOutcome:
        """One call on the session: opened again if it ended, and the call sent again once
        if its request cannot have run (or the tool says it may run twice)."""
        from mcp.shared.exceptions import MCPError

        for attempt in (1, 2):
            try:
                connection = await self._session()
            except Exception as exc:  # the server will not start, or is not there
                return ToolOutcome(
                    error="the tool's MCP server could not be reached",
                    error_for_model=f"the tool's MCP server could not be reached: {_reason(exc)}",
                )
            client = connection.client
            if client is None:  # it ended since: open another
                continue
            try:
                answer = await client.call_tool(tool.remote_name, dict(arguments), meta=_trace_context())
            except MCPError as exc:
                if not _lost(exc):
                    return ToolOutcome(error=f"the MCP server refused the call: {exc.error.message}")
                connection.drop()
                if attempt == 1 and (tool.repeatable or await connection.never_reached(exc)):
                    logger.info("%s: the session was lost; calling %s again on a new one", self.label, tool.name)
                    continue
                return ToolOutcome(
                    error="the MCP server's connection closed during the call (it may or may not have run)",
                )
            except Exception as exc:  # an answer the SDK could not read, or that fails the tool's output schema
                return ToolOutcome(
                    error="the MCP server's answer could not be read", error_for_model=f"the answer: {_reason(exc)}"
                )
            return _outcome(answer, tool.output_schema)
        return ToolOutcome(
            error="the tool's MCP server could not be reached", error_for_model="its session kept ending"
        )

    # --- for the subclasses -------------------------------------------------------------

    def _describe(self) -> str:
        raise NotImplementedError

    def _identity(self) -> tuple[object, ...]:
        raise NotImplementedError

    def _transport(self) -> Transport:
        raise NotImplementedError

    def __repr__(self) -> str:
        return self.label


class MCPServerStdio(MCPToolset):
    """An MCP server run as the service's child process, over its stdin and stdout.

    `command` is looked up on PATH, then beside this Python (a server installed in the same
    virtualenv is found even when it is not activated). `env` is added to the few variables
    the SDK passes on (HOME, PATH, USER, ...), not to the whole environment; pass
    `env=dict(os.environ)` for all of it. `timeout` bounds each call, as a function tool's;
    `connect_timeout` the start of the server and the listing of its tools.
    """

    def __init__(
        self,
        command: str,
        args: Sequence[str] = (),
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | Path | None = None,
        tool_prefix: str | None = None,
        include: Iterable[str] | None = None,
        exclude: Iterable[str] = (),
        approval: Approval | Mapping[str, Approval] | None = None,
        timeout: float = DEFAULT_TOOL_TIMEOUT,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
    ) -> None:
        if not isinstance(command, str) or not command:
            raise ValueError(f"command= is the program that serves over stdio, got {command!r}")
        if isinstance(args, str):
            raise TypeError(f"args= takes a list of arguments, got a str: write args={[args]!r}")
        super().__init__(
            tool_prefix=tool_prefix,
            include=include,
            exclude=exclude,
            approval=approval,
            timeout=timeout,
            connect_timeout=connect_timeout,
        )
        self.command = command
        self.args = tuple(args)
        self.env = dict(env) if env is not None else None
        self.cwd = cwd

    def _describe(self) -> str:
        described = " ".join([self.command, *self.args])
        return described if len(described) <= 80 else described[:77] + "..."

    def _identity(self) -> tuple[object, ...]:
        env = tuple(sorted(self.env.items())) if self.env is not None else None
        return ("stdio", self.command, self.args, env, str(self.cwd) if self.cwd is not None else None)

    def _transport(self) -> Transport:
        from mcp.client.stdio import StdioServerParameters, get_default_environment, stdio_client

        environment = get_default_environment() | (self.env or {})
        program = _program(self.command, environment.get("PATH"))
        command, args = program, list(self.args)
        if sys.platform.startswith("linux") and sys.executable:
            command, args = sys.executable, ["-I", "-S", "-c", _DIE_WITH_PARENT, str(os.getpid()), program, *args]
        return stdio_client(StdioServerParameters(command=command, args=args, env=self.env, cwd=self.cwd))


class MCPServerStreamableHTTP(MCPToolset):
    """An MCP server at a URL, over streamable HTTP. `headers` go with every request (a key,
    say). `timeout` bounds each call, as a function tool's; `connect_timeout` the opening of
    the session and the listing of its tools."""

    def __init__(
        self,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        tool_prefix: str | None = None,
        include: Iterable[str] | None = None,
        exclude: Iterable[str] = (),
        approval: Approval | Mapping[str, Approval] | None = None,
        timeout: float = DEFAULT_TOOL_TIMEOUT,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
    ) -> None:
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ValueError(f"url= is the server's http(s) URL (often ending in /mcp), got {url!r}")
        super().__init__(
            tool_prefix=tool_prefix,
            include=include,
            exclude=exclude,
            approval=approval,
            timeout=timeout,
            connect_timeout=connect_timeout,
        )
        self.url = url
        self.headers = dict(headers or {})

    def _describe(self) -> str:
        scheme, _, rest = self.url.partition("://")
        host, slash, path = rest.partition("/")
        return f"{scheme}://{host.rpartition('@')[2]}{slash}{path}"  # never its credentials

    def _identity(self) -> tuple[object, ...]:
        return ("http", self.url, tuple(sorted(self.headers.items())))

    def _transport(self) -> Transport:
        return _http_transport(self.url, self.headers)


@asynccontextmanager
async def _http_transport(url: str, headers: Mapping[str, str]) -> AsyncIterator[Any]:
    """The SDK's streamable HTTP transport on an HTTP client of ours (the SDK 2 takes headers
    there, on an httpx2 client), closed with it."""
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    # The SDK's own defaults: 30 s to connect or send, 300 s between the bytes of a stream.
    async with httpx2.AsyncClient(headers=dict(headers), timeout=httpx2.Timeout(30.0, read=300.0)) as http:
        async with streamable_http_client(url, http_client=http) as streams:
            yield streams


def _trace_context() -> mcp_types.RequestParamsMeta | None:
    """The W3C trace context of the current span (the call's execute_tool), for a call's `_meta`
    (MCP's SEP-414: `traceparent`, `tracestate`): the server's spans join the run's trace. The
    session's HTTP requests are sent from its own task, where no span is current, so the context
    rides in the call, whatever the transport. None when tracing is off."""
    if current_tracing() is None:
        return None
    from sentient_assist.runtime.tracing import inject_current

    carrier: dict[str, str] = {}
    inject_current(carrier)
    return cast("mcp_types.RequestParamsMeta", carrier) if carrier else None


class MCPTool(Tool):
    """One tool of an MCP server, as an LLMAgent offers it: its schema is the server's, its
    arguments are checked by the server, and a call goes to the server's session."""

    def __init__(self, server: MCPToolset, listed: mcp_types.Tool, name: str, approval: Approval | None) -> None:
        def call() -> None:  # never called: `_invoke()` sends the call to the server
            return None

        description = listed.description or listed.title or listed.name
        super().__init__(call, name=name, description=description, timeout=server.timeout, approval=approval)
        self.server = server
        self.remote_name = listed.name
        parameters = dict(listed.input_schema)
        parameters.pop("title", None)
        self._spec = ToolSpec(name=name, description=self.description, parameters=parameters)
        self.output_schema = listed.output_schema
        hints = listed.annotations
        # A call whose session was lost in flight may have run: only these are sent again.
        self.repeatable = bool(hints is not None and (hints.read_only_hint or hints.idempotent_hint))

    @property
    def spec(self) -> ToolSpec:
        return self._spec

    def _arguments(self, raw: JSONObject) -> Mapping[str, object] | ToolOutcome:
        return raw  # the server checks them against its schema, and says what is wrong

    async def _invoke(self, kwargs: Mapping[str, object]) -> ToolOutcome:
        return await self.server._call(self, kwargs)

    def __repr__(self) -> str:
        return f"MCPTool({self.name!r} of {self.server.label})"


class _Connection:
    """One session with a server, in the one task that opens and closes it (`_own`): the
    SDK's client and the listed tools, once `opened` is done; `ended` once it is of no more use."""

    def __init__(self, server: MCPToolset, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.label = server.label
        self.opened: asyncio.Future[None] = loop.create_future()
        self.opened.add_done_callback(_retrieved)
        self.client: Client | None = None
        self.tools: list[mcp_types.Tool] = []
        self.ended = False  # a caller opens another
        self.closing = False  # on purpose (aclose): nothing to warn of
        self.cause: BaseException | None = None  # why it ended, when it failed
        self._stop = asyncio.Event()
        self._opening: CancelScope | None = None  # bounds the opening
        self.task = loop.create_task(self._own(server), name=f"MCP session: {self.label}")

    async def _own(self, server: MCPToolset) -> None:
        import anyio
        from mcp import Client
        from mcp.types import Implementation

        try:
            with anyio.CancelScope(deadline=anyio.current_time() + server.connect_timeout) as opening:
                self._opening = opening
                transport = _watched(server._transport(), self._server_ended)
                client = Client(
                    transport,
                    cache=None,  # tools are listed once a session: nothing to keep
                    client_info=Implementation(name="sentient-assist", version=__version__),
                )
                async with client:
                    tools = await _all_tools(client)
                    opening.deadline = math.inf  # open: it lasts until it is closed or lost
                    self.client, self.tools = client, tools
                    self.opened.set_result(None)
                    await self._stop.wait()
            if opening.cancelled_caught and not self.opened.done():
                raise TimeoutError(
                    "it was closed while it opened"
                    if self.closing
                    else f"it did not answer within {server.connect_timeout:g} seconds"
                )
        except Exception as exc:
            self.cause = exc
            if not self.opened.done():
                self.opened.set_exception(ConnectionError(f"{self.label} could not be opened: {_reason(exc)}"))
            elif not self.closing:
                logger.warning("%s: the session ended: %s", self.label, _reason(exc))
        finally:
            self.ended = True
            self.client = None
            if not self.opened.done():
                self.opened.set_exception(ConnectionError(f"{self.label}: the session was closed while it opened"))

    def _server_ended(self) -> None:
        """The server's messages ended (its process exited, or its stream closed)."""
        if not self.ended and not self.closing and self.opened.done():
            logger.warning(
                "%s: the server closed the session (its process ended?); the next call opens another", self.label
            )
        self.drop()

    def drop(self) -> None:
        """Of no more use: its task closes it, and the next caller opens another."""
        self.ended = True
        self._stop.set()

    async def never_reached(self, error: MCPError) -> bool:
        """Whether a request that failed with `error` cannot have reached the server: the HTTP
        server forgot the session, or could not be connected to at all."""
        if _SESSION_GONE.search(error.error.message):
            return True  # refused before it ran: the server (another one, now) did not know the session
        await asyncio.wait({self.task}, timeout=_ENDING_TIMEOUT)
        return any(type(exc).__name__ in {"ConnectError", "ConnectTimeout"} for exc in _leaves(self.cause))

    async def close(self) -> None:
        """Close it on purpose, and wait for its server to be stopped."""
        self.closing = True
        self.ended = True
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is not self.loop:
            self.abandon()
            return
        if not self.opened.done() and self._opening is not None:
            self._opening.cancel()  # still opening: stop it (only this task's scope is cancelled)
        self._stop.set()
        done, _ = await asyncio.wait({self.task}, timeout=_CLOSE_TIMEOUT)
        if not done:
            logger.warning("%s: its session did not close within %g seconds", self.label, _CLOSE_TIMEOUT)

    def abandon(self) -> None:
        """Leave it to its own event loop (a test's, or run_sync's, gone by): stopped if that
        loop still runs; else it ended with the loop, whose shutdown cancelled its task."""
        self.closing = True
        self.ended = True
        if not self.loop.is_closed():
            self.loop.call_soon_threadsafe(self._stop.set)


def _retrieved(future: asyncio.Future[None]) -> None:
    if not future.cancelled():
        future.exception()  # read, so that asyncio does not log one nobody awaited


@asynccontextmanager
async def _watched(transport: Transport, ended: Callable[[], None]) -> AsyncIterator[tuple[_EndWatch, Any]]:
    """The transport, whose read stream calls `ended` when the server's messages end."""
    async with transport as (read, write):
        yield _EndWatch(read, ended), write


class _ReadStream(Protocol):
    """What _EndWatch uses of a transport's read stream."""

    async def receive(self) -> SessionMessage | Exception: ...

    async def aclose(self) -> None: ...


class _EndWatch:
    """A transport's read stream that says when it ends (the SDK's client reads it)."""

    def __init__(self, inner: _ReadStream, ended: Callable[[], None]) -> None:
        self._inner = inner
        self._ended = ended

    @property
    def last_context(self) -> object:  # the sender's context, which the SDK reads off some streams
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> SessionMessage | Exception:
        try:
            item = await self._inner.receive()
        except Exception:  # EndOfStream, or the stream closed under the reader
            self._ended()
            raise
        return item

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> _EndWatch:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        import anyio

        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> _EndWatch:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        await self.aclose()


async def _all_tools(client: Client) -> list[mcp_types.Tool]:
    tools: list[mcp_types.Tool] = []
    cursor: str | None = None
    for _ in range(_PAGES):
        page = await client.list_tools(cursor=cursor)
        tools += page.tools
        cursor = page.next_cursor
        if cursor is None:
            break
    return tools


def _outcome(answer: mcp_types.CallToolResult, output_schema: Mapping[str, object] | None) -> ToolOutcome:
    """A server's answer as the call's outcome: the text (or the structured content) for the
    model, pictures and resources described in a line each; whole in TOOL_RESULT."""
    from mcp.types import TextContent

    text = "\n".join(block.text for block in answer.content if isinstance(block, TextContent))
    others = [block for block in answer.content if not isinstance(block, TextContent)]
    if answer.is_error:
        return ToolOutcome(error=text or "the tool failed, and its server said no more")
    structured = _unwrapped(answer.structured_content, output_schema)
    parts: list[str] = []
    if structured is not None:
        if text and not _restates(text, answer.structured_content, structured):
            parts.append(text)  # a text of its own beside the data (not the data written again)
        parts.append(structured if isinstance(structured, str) else dumps_json(structured))
    elif text:
        parts.append(text)
    parts += [_described(block) for block in others]
    result: JSONValue = structured if structured is not None else text
    if others:
        result = {
            **({"text": text} if text else {}),
            **({"structured_content": structured} if structured is not None else {}),
            "content": [block.model_dump(mode="json", by_alias=True, exclude_none=True) for block in others],
        }
    if result == "" or result is None:
        return ToolOutcome(result="ok", for_model="ok")  # as a function that returns nothing
    return ToolOutcome(result=result, for_model="\n".join(parts))


def _unwrapped(structured: JSONValue, output_schema: Mapping[str, object] | None) -> JSONValue:
    """Structured content as the tool's function returned it: an SDK server wraps a value
    that is not an object (an int, a list) as {"result": value}."""
    if not isinstance(structured, dict) or set(structured) != {"result"}:
        return structured
    properties = (output_schema or {}).get("properties")
    if output_schema is None or (isinstance(properties, dict) and set(properties) == {"result"}):
        return structured["result"]
    return structured


def _restates(text: str, structured: object, unwrapped: object) -> bool:
    """Whether the text is the structured content written out (as the spec asks servers to)."""
    import json

    if text == unwrapped:
        return True
    try:
        parsed = json.loads(text)
    except ValueError:
        return False
    return bool(parsed == structured or parsed == unwrapped)


def _described(block: Any) -> str:
    """A content block other than text, in a line the model reads (TOOL_RESULT has it whole)."""
    kind = getattr(block, "type", "content")
    if kind in ("image", "audio"):
        return f"[{kind}: {block.mime_type}, {_decoded_size(block.data)} bytes, in the tool's result for the user]"
    if kind == "resource_link":
        about = f" ({block.description})" if block.description else ""
        return f"[a link to the resource {block.uri}: {block.name}{about}]"
    if kind == "resource":
        resource = block.resource
        mime = f", {resource.mime_type}" if resource.mime_type else ""
        text = getattr(resource, "text", None)
        if text is None:
            return f"[resource {resource.uri}{mime}, {_decoded_size(resource.blob)} bytes]"
        cut = text if len(text) <= _RESOURCE_TEXT else text[:_RESOURCE_TEXT] + f" [... {len(text)} characters]"
        return f"[resource {resource.uri}{mime}]\n{cut}"
    return f"[{kind} content]"


def _decoded_size(data: str) -> int:
    return len(data) * 3 // 4 - data[-2:].count("=")


def _lost(error: MCPError) -> bool:
    """Whether an MCPError says the session is gone (not that the server refused the call)."""
    return error.error.code == _CONNECTION_CLOSED or _SESSION_GONE.search(error.error.message) is not None


def _leaves(exc: BaseException | None) -> list[BaseException]:
    if exc is None:
        return []
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc, *_leaves(exc.__cause__)]


def _reason(exc: BaseException) -> str:
    """An exception in a few words: the first of a group, its type and message."""
    leaves = _leaves(exc) or [exc]
    first = leaves[0]
    message = str(first).strip()
    return f"{type(first).__name__}: {message}" if message else type(first).__name__


def _names(option: str, names: Iterable[str]) -> frozenset[str]:
    if isinstance(names, str) or not all(isinstance(name, str) for name in names):
        raise TypeError(f"{option}= takes a list of tool names (as the server names them), got {names!r}")
    return frozenset(names)


def _may_share(one: MCPToolset, other: MCPToolset) -> bool:
    """Whether two toolsets of one server and prefix may both keep a tool (then both offer it)."""
    if one.include is not None and other.include is not None:
        return bool((one.include - one.exclude) & (other.include - other.exclude))
    if one.include is not None:
        return bool(one.include - one.exclude - other.exclude)
    if other.include is not None:
        return bool(other.include - other.exclude - one.exclude)
    return True


def _program(command: str, path: str | None) -> str:
    """The server's program: on PATH, else beside this Python (its virtualenv's bin/); a path
    as it is (relative to cwd=, where the server runs)."""
    if os.sep in command:
        return command
    found = shutil.which(command, path=path) or shutil.which(command, path=str(Path(sys.executable).parent))
    if found is None:
        raise FileNotFoundError(f"{command!r} is not on PATH, nor beside {sys.executable}")
    return found
