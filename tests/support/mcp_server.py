"""An MCP server the tests write with the `mcp` SDK (its MCPServer), one tool per behaviour.

    python tests/support/mcp_server.py                 # over stdio
    python tests/support/mcp_server.py --http PORT     # over streamable HTTP, on 127.0.0.1:PORT/mcp
    python tests/support/mcp_server.py --legacy ...    # as a server of 2025: sessions that begin with `initialize`

Its tools answer in text (`echo`), in structured content (`add`, `forecast`), with an error
(`fail`, `isError`), with an image and a resource (`picture`, `document`), slowly (`slow`),
not at all (`crash` ends the process mid-call), with the server's PID (`pid`), so a test
can count the processes serving a toolset, and with the trace context a call came with
(`trace_context`).

`HttpServer` runs it over HTTP for a test (started, killed and started again on one port);
`processes()` finds the ones running, by PID.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.utilities.types import Image
from mcp.types import CallToolResult, EmbeddedResource, ResourceLink, TextContent, TextResourceContents
from pydantic import BaseModel

PATH = Path(__file__).resolve()

# A 1x1 transparent PNG.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)

server = MCPServer("test-tools", instructions="Tools for sentient_assist's tests.", log_level="WARNING")


class Forecast(BaseModel):
    city: str
    temperature_c: float
    sky: str


@server.tool()
def echo(text: str) -> str:
    """Say the text back.

    Args:
        text: What to say back.
    """
    return text


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def forecast(city: str) -> Forecast:
    """Tomorrow's weather in a city."""
    return Forecast(city=city, temperature_c=21.5, sky="clear")


@server.tool()
def fail(reason: str = "no reason") -> str:
    """Always fails, saying why."""
    raise ToolError(f"failed on purpose: {reason}")


@server.tool()
async def slow(seconds: float, started: str = "") -> str:
    """Answers after `seconds` (and makes the file `started` names, if any, as it begins)."""
    if started:
        Path(started).touch()
    await asyncio.sleep(seconds)
    return f"slept {seconds:g}s"


@server.tool()
def crash() -> str:
    """Ends the server's process in the middle of the call."""
    os._exit(3)


@server.tool()
def pid() -> int:
    """The server process's id."""
    return os.getpid()


@server.tool()
def trace_context(ctx: Context) -> str:
    """The W3C traceparent the call came with in its `_meta` (MCP's SEP-414), or "none"."""
    meta = ctx.request_context.meta or {}
    return str(meta.get("traceparent", "none"))


@server.tool()
def picture() -> CallToolResult:
    """A one-pixel picture, with a caption."""
    return CallToolResult(content=[TextContent(text="a transparent pixel"), Image(data=PNG).to_image_content()])


@server.tool()
def document() -> CallToolResult:
    """A text resource, embedded, and a link to another."""
    return CallToolResult(
        content=[
            TextContent(text="the notes are attached"),
            EmbeddedResource(
                resource=TextResourceContents(uri="memo://notes", mime_type="text/plain", text="buy milk"),
            ),
            ResourceLink(uri="memo://archive", name="archive", mime_type="text/plain", description="older notes"),
        ]
    )


class HttpServer:
    """This server over streamable HTTP on a loopback port, as a test's own process: a port, not a
    socket handed over, because a test stops it and starts it again there, and nothing may listen
    on the port meanwhile. Its first start takes another port if it lost its own."""

    def __init__(self, *options: str) -> None:
        from tests.support.server import free_port

        self.options = options
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self._log = tempfile.TemporaryFile()
        self._started_once = False

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def start(self) -> HttpServer:
        from tests.support.server import PortTaken, check_port_taken, free_port

        for _ in range(5):
            try:
                return self._start(check_port_taken)
            except PortTaken:
                if self._started_once:
                    raise  # a restart must keep its port
                self.port = free_port()
        raise RuntimeError("the MCP test server found no free port")

    def _start(self, check_port_taken: Callable[[str], None]) -> HttpServer:
        self._log.seek(0)
        self._log.truncate()
        command = [sys.executable, str(PATH), "--http", str(self.port), *self.options]
        self.process = subprocess.Popen(command, stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                self._log.seek(0)
                output = self._log.read().decode(errors="replace")
                check_port_taken(output)
                raise RuntimeError(f"the MCP test server exited with {self.process.returncode}:\n{output[-2000:]}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                self._started_once = True
                return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("the MCP test server did not listen within 20 s")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def close(self) -> None:
        """Stops it for good: its log file goes too."""
        self.stop()
        self._log.close()


def processes(children_of: int | None = None) -> list[int]:
    """PIDs of the live processes running this server (a zombie is not live): all of them, or
    those whose parent is `children_of`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes().split(b"\0")
            state, parent = (entry / "stat").read_text().rsplit(")", 1)[1].split()[:2]
        except OSError:
            continue
        if str(PATH).encode() in command and state != "Z" and children_of in (None, int(parent)):
            found.append(int(entry.name))
    return found


def alive(pid: int) -> bool:
    """Whether the process lives (a zombie, dead but not yet reaped, does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--http", type=int, metavar="PORT", help="serve streamable HTTP on 127.0.0.1:PORT/mcp")
    parser.add_argument("--legacy", action="store_true", help="speak only the protocol of 2025 (no server/discover)")
    options = parser.parse_args()
    if options.legacy:
        # A client that finds no server/discover falls back to `initialize`: a stateful session,
        # over HTTP one that a restarted server no longer knows ("Session terminated").
        server._lowlevel_server._request_handlers.pop("server/discover")
    if options.http is None:
        server.run()
    else:
        server.run("streamable-http", host="127.0.0.1", port=options.http)


if __name__ == "__main__":
    main()
