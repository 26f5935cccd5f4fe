"""The private parts of uvicorn and sse-starlette the service relies on, checked against the
installed packages: each failure names the package, its version and what moved, so that a new
release that changes one is caught here rather than by a hostile client in production.

uvicorn's are read in sentient_assist/server/protocol.py alone, sse-starlette's in
sentient_assist/server/mcp/drain.py alone, Starlette's (the request's cached JSON) in
sentient_assist/server/admission.py alone; pyproject.toml bounds each below its next minor
version. The behaviour built on them is tested end to end elsewhere (test_hostile_clients.py,
test_shutdown.py, test_mcp_face.py's SIGTERM tests); these say which internal moved.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import inspect
import signal
import socket
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from importlib.metadata import version
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
import uvicorn

from sentient_assist.server.settings import load_settings

# Where each package's internals are read.
READ_IN = {
    "uvicorn": "sentient_assist/server/protocol.py",
    "starlette": "sentient_assist/server/admission.py",
    "sse-starlette": "sentient_assist/server/mcp/drain.py",
}
WAIT_SECONDS = 10.0


def require(ok: object, package: str, what: str) -> None:
    """Fail, naming `package` and its installed version, unless `ok`."""
    if not ok:
        pytest.fail(
            f"{package} {version(package)} no longer does what {READ_IN[package]} relies on: {what}. "
            f"Adapt {READ_IN[package]} to this release, then move {package}'s upper bound in pyproject.toml.",
            pytrace=False,
        )


def internal(package: str, module: str, name: str) -> Any:
    """`module.name` of `package`, or a failure naming the package's version."""
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        require(False, package, f"`{module}.{name}` is gone")


async def until(predicate: Callable[[], object], what: str) -> None:
    """Wait, on this loop, for `predicate()` to be true."""
    deadline = asyncio.get_running_loop().time() + WAIT_SECONDS
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"{what}: not within {WAIT_SECONDS:g} s")
        await asyncio.sleep(0.01)


@asynccontextmanager
async def serving(app: Any, **options: Any) -> AsyncIterator[tuple[uvicorn.Server, tuple[str, int]]]:
    """`app` under a real uvicorn on this test's loop, in the main thread (so with uvicorn's
    signal handlers), on a socket bound before it starts. Yields the server and its address."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    config = uvicorn.Config(app, lifespan="off", log_config=None, **options)
    server = uvicorn.Server(config)
    serve = asyncio.create_task(server.serve(sockets=[listener]))
    try:
        await until(lambda: server.started or serve.done(), "uvicorn started")
        if serve.done():
            serve.result()
        yield server, listener.getsockname()
    finally:
        server.should_exit = True
        await asyncio.wait_for(serve, WAIT_SECONDS)
        listener.close()


# uvicorn


def overridden_hooks() -> list[str]:
    """The methods of uvicorn's protocol that the service's protocol overrides."""
    from sentient_assist.server.protocol import BoundedHttpToolsProtocol

    return [name for name, value in vars(BoundedHttpToolsProtocol).items() if callable(value) and name[0] != "_"]


def test_uvicorn_httptools_protocol_defines_each_method_the_bounded_protocol_overrides():
    base = internal("uvicorn", "uvicorn.protocols.http.httptools_impl", "HttpToolsProtocol")
    from sentient_assist.server.protocol import BoundedHttpToolsProtocol

    hooks = overridden_hooks()
    assert {"data_received", "on_headers_complete", "on_response_complete", "pause_writing"} <= set(hooks)
    for name in ["__init__", *hooks]:
        # uvicorn's own, not asyncio.Protocol's no-op: super() must reach uvicorn's work.
        require(name in vars(base), "uvicorn", f"HttpToolsProtocol defines no `{name}` of its own")
        theirs = list(inspect.signature(vars(base)[name]).parameters)
        ours = list(inspect.signature(vars(BoundedHttpToolsProtocol)[name]).parameters)
        require(theirs == ours, "uvicorn", f"HttpToolsProtocol.{name} takes {theirs}, not {ours}")
    # The names our subclass adds must not be uvicorn's: a method or attribute of the same name
    # would be replaced by ours without a word.
    for name in [*BoundedHttpToolsProtocol.__slots__, *(n for n in vars(BoundedHttpToolsProtocol) if n[0] == "_")]:
        if not name.startswith("__"):
            require(not hasattr(base, name), "uvicorn", f"HttpToolsProtocol has a `{name}` of its own")
    internal("uvicorn", "uvicorn.server", "ServerState")


class _App:
    """An app holding Settings as create_app's does (`app.state.settings`)."""

    def __init__(self, paused: Callable[[], bool]) -> None:
        self.state = SimpleNamespace(settings=load_settings())
        self._paused = paused

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["path"] == "/answer-early":  # before reading the body
            seen = b"yes" if "test.probe" in scope.get("extensions", {}) else b"no!"
            await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"3")]})
            await send({"type": "http.response.body", "body": seen})
            return
        await send({"type": "http.response.start", "status": 200, "headers": []})
        while not self._paused():  # until the client's not reading fills the buffers
            await send({"type": "http.response.body", "body": b"x" * 262_144, "more_body": True})
        await send({"type": "http.response.body", "body": b"end"})


async def test_uvicorn_calls_each_hook_and_keeps_the_state_the_bounded_protocol_reads():
    base = internal("uvicorn", "uvicorn.protocols.http.httptools_impl", "HttpToolsProtocol")
    from sentient_assist.server.protocol import BoundedHttpToolsProtocol, settings_of

    calls: list[str] = []
    made: list[Any] = []

    def recorded(name: str) -> Callable[..., Any]:
        def hook(self: Any, *args: Any) -> Any:
            calls.append(name)
            return getattr(base, name)(self, *args)

        return hook

    hooks = overridden_hooks()
    recorder = type("Recorder", (base,), {name: recorded(name) for name in hooks})

    class Probe(recorder):  # type: ignore[valid-type, misc]
        """uvicorn's own protocol, recording its hooks and marking its scope as ours does."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            made.append(self)

        def on_headers_complete(self) -> None:
            self.scope.setdefault("extensions", {})["test.probe"] = {}
            super().on_headers_complete()

    app = _App(paused=lambda: "pause_writing" in calls)
    async with serving(app, http=Probe, timeout_keep_alive=7) as (server, (host, port)):
        config = server.config
        require(
            settings_of(getattr(config, "loaded_app", None)) is app.state.settings,
            "uvicorn",
            "Config.loaded_app is not the app served (or the middleware around it, each with `.app`)",
        )
        # connection_limits() keeps each Config's limits on it.
        require(hasattr(config, "__dict__"), "uvicorn", "a Config has no instance dict to keep attributes in")

        client = socket.socket()
        client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        client.connect((host, port))
        client.setblocking(False)
        reader, writer = await asyncio.open_connection(sock=client, limit=1024)
        writer.write(b"POST /answer-early HTTP/1.1\r\nhost: x\r\ncontent-length: 10\r\n\r\n12345")
        answer = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), WAIT_SECONDS)
        body = await asyncio.wait_for(reader.readexactly(3), WAIT_SECONDS)
        (proto,) = made
        require(body == b"yes", "uvicorn", "the scope at on_headers_complete is not the one the app is given")
        require(answer.startswith(b"HTTP/1.1 200"), "uvicorn", f"answered {answer!r}")
        require(
            proto in proto.connections and proto.connections is server.server_state.connections,
            "uvicorn",
            "`connections` is not the server's set of open connections",
        )
        require(proto.loop is asyncio.get_running_loop(), "uvicorn", "`loop` is not the loop serving")
        require(proto.timeout_keep_alive == 7, "uvicorn", "`timeout_keep_alive` is not Config.timeout_keep_alive")
        for method in ("write", "close", "abort", "is_closing"):
            require(callable(getattr(proto.transport, method, None)), "uvicorn", f"`transport` has no {method}()")
        cycle = proto.cycle
        require(
            getattr(cycle, "response_complete", None) is True and getattr(cycle, "more_body", None) is True,
            "uvicorn",
            "`cycle` of a request answered before its body came has no response_complete and more_body both true",
        )
        ours = {*BoundedHttpToolsProtocol.__slots__, *(n for n in vars(BoundedHttpToolsProtocol) if n[0] == "_")}
        taken = ours & set(vars(proto))
        require(not taken, "uvicorn", f"HttpToolsProtocol's instances have attributes of the names {sorted(taken)}")

        writer.write(b"67890")  # the rest of the body nobody read
        await until(lambda: "on_message_complete" in calls, "the end of the body")
        writer.write(b"GET /big HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
        await until(lambda: "pause_writing" in calls, "uvicorn's pause_writing on a client that does not read")
        require(proto.cycle.response_complete is False, "uvicorn", "`cycle.response_complete` is true mid-response")
        rest = await asyncio.wait_for(reader.read(), WAIT_SECONDS)
        writer.close()
        require(rest.endswith(b"3\r\nend\r\n0\r\n\r\n"), "uvicorn", "the response after the pause did not end")
        await until(lambda: "connection_lost" in calls, "the connection's end")
    missed = [name for name in hooks if name not in calls]
    require(not missed, "uvicorn", f"HttpToolsProtocol never called {missed} over a connection that needs them")


@pytest.fixture
def sse_starlette_status() -> Iterator[Any]:
    """sse-starlette's AppStatus, None without sse-starlette; put back as it starts, after."""
    if importlib.util.find_spec("sse_starlette") is None:
        yield None
        return
    status = internal("sse-starlette", "sse_starlette.sse", "AppStatus")
    yield status
    # Process-wide: a handle_exit (patched by sse-starlette) may have set it.
    status.should_exit = False
    status.enable_automatic_graceful_drain_mode()


async def test_uvicorn_servers_sigterm_handler_is_their_bound_handle_exit_setting_should_exit(sse_starlette_status):
    # sse-starlette, imported by the fixture when installed (the /mcp face imports it), replaces
    # Server.handle_exit: the handler must still be the server's bound method then.
    from sentient_assist.server.protocol import uvicorn_is_exiting

    before = signal.getsignal(signal.SIGTERM)

    async def app(scope: Any, receive: Any, send: Any) -> None:
        raise AssertionError("no request is made")

    async with serving(app) as (server, _):
        handler = signal.getsignal(signal.SIGTERM)
        require(
            getattr(handler, "__self__", None) is server,
            "uvicorn",
            f"a serving Server's SIGTERM handler is {handler!r}, not a bound method of the Server",
        )
        require(handler == server.handle_exit, "uvicorn", "a serving Server's SIGTERM handler is not its handle_exit")
        assert not uvicorn_is_exiting()
        server.should_exit = True
        assert uvicorn_is_exiting()
    assert signal.getsignal(signal.SIGTERM) == before and not uvicorn_is_exiting()

    stopped = uvicorn.Server(uvicorn.Config(app))
    stopped.handle_exit(signal.SIGTERM, None)
    require(stopped.should_exit is True, "uvicorn", "Server.handle_exit(SIGTERM) does not set should_exit")


# sse-starlette


@pytest.fixture
def app_status(sse_starlette_status: Any) -> Any:
    if sse_starlette_status is None:
        pytest.skip("sse-starlette comes with the mcp extra")
    return sse_starlette_status


def test_sse_starlette_app_status_has_the_switches_drain_uses(app_status):
    require(isinstance(app_status.should_exit, bool), "sse-starlette", "AppStatus.should_exit is not a flag")
    for name in ("disable_automatic_graceful_drain", "enable_automatic_graceful_drain_mode"):
        require(callable(getattr(app_status, name, None)), "sse-starlette", f"AppStatus has no {name}()")
    app_status.disable_automatic_graceful_drain()
    # Disabled, uvicorn's SIGTERM handler (which sse-starlette patches) leaves the streams alone.
    uvicorn.Server(uvicorn.Config("tests.support.agents:unused")).handle_exit(signal.SIGTERM, None)
    require(
        app_status.should_exit is False,
        "sse-starlette",
        "with disable_automatic_graceful_drain(), a SIGTERM still sets AppStatus.should_exit",
    )


async def test_sse_starlette_ends_its_open_streams_once_app_status_should_exit_is_set(app_status):
    from sse_starlette import EventSourceResponse
    from starlette.applications import Starlette
    from starlette.routing import Route

    async def forever() -> AsyncIterator[dict[str, str]]:
        yield {"data": "first"}
        await asyncio.Event().wait()
        yield {"data": "never"}

    async def stream(request: Any) -> EventSourceResponse:
        return EventSourceResponse(forever())

    app_status.disable_automatic_graceful_drain()  # as drain.py runs the mcp face
    app = Starlette(routes=[Route("/stream", stream)])
    async with serving(app) as (_, (host, port)), httpx.AsyncClient(timeout=WAIT_SECONDS) as client:
        async with client.stream("GET", f"http://{host}:{port}/stream") as response:
            lines = response.aiter_lines()
            assert await anext(lines) == "data: first"
            app_status.should_exit = True
            rest = [line async for line in lines]
    require("data: never" not in rest, "sse-starlette", "AppStatus.should_exit = True does not end its streams")


async def test_starlette_requests_answer_json_from_the_cache_the_admitted_route_fills():
    from starlette.requests import Request

    async def receive() -> dict[str, object]:
        raise AssertionError("read the body again")

    request = Request({"type": "http", "method": "POST", "headers": []}, receive)
    parsed = {"parsed": "by orjson"}
    vars(request)["_json"] = parsed
    require(await request.json() is parsed, "starlette", "`Request.json()` no longer answers from `_json`")
