"""The HTTP protocol the service runs uvicorn with: uvicorn's own (httptools), with a deadline for
every state of a connection, a bound on a request's header block and on the connections held.

uvicorn's httptools protocol takes a header block of any size and any slowness, reads on the
body of a request it has already answered for as long as it comes (each byte putting off the
keep-alive timeout), waits for ever to flush a response its client does not read, and accepts
connections until the process runs out of file descriptors. Here:

- a request's header block is cut at ASSIST_MAX_HEADER_BYTES (431) and must arrive within
  ASSIST_HEADER_TIMEOUT seconds of the connection, or of the first byte after the previous
  response (408); then the connection is closed;
- after a response, the connection is closed when the keep-alive timeout passes (uvicorn's
  `timeout_keep_alive`, ASSIST_KEEP_ALIVE_TIMEOUT under `assist serve`) without a new request's
  headers. The rest of a body nobody read does not put it off: it is read and dropped, up to
  ASSIST_MAX_BODY_BYTES, past which the connection is closed;
- a connection whose client takes nothing of its response is aborted (its unsent bytes dropped):
  once the server has closed it, after the keep-alive timeout; before that, after
  ASSIST_REQUEST_TIMEOUT. Each request's scope offers the abort at once (ABORT_EXTENSION), which
  EventStream uses on a stream it cuts off;
- past ASSIST_MAX_CONNECTIONS connections (at most three quarters of the process's file-descriptor
  limit), a new one gets a 503 and is closed.

`assist serve` and DefaultServer use it; with uvicorn's own command line, pass
`--http sentient_assist.server.protocol:BoundedHttpToolsProtocol`.

The limits are the Settings of the app the server serves (`create_app`'s `app.state.settings`,
found through uvicorn's `config.loaded_app` and the middleware around it), so that each server
keeps its own app's, in the process that built the app (--workers and --reload children too).
An app that holds no Settings (one of your own, with add_routes) gets the environment's.

This is the one module that reads uvicorn's internals: its httptools protocol (subclassed
here), its `ServerState`, `Config.loaded_app`, and its Server as the SIGTERM handler
(`uvicorn_is_exiting`). pyproject.toml bounds uvicorn below its next minor version, and
tests/server/test_framework_internals.py fails, naming uvicorn's version, when one changes.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from typing import Any, NamedTuple

from uvicorn import Server
from uvicorn.config import Config
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

from sentient_assist.server import metrics
from sentient_assist.server.event_stream import ABORT_EXTENSION
from sentient_assist.server.settings import Settings, env_name, load_settings

# The status line, and the headers of each refusal but its body's.
_REFUSALS = {
    408: b"HTTP/1.1 408 Request Timeout\r\n",
    431: b"HTTP/1.1 431 Request Header Fields Too Large\r\n",
    503: b"HTTP/1.1 503 Service Unavailable\r\nretry-after: 1\r\n",
}


# Where a Config keeps the limits worked out for the app it loaded (Config has no slots).
_LIMITS_ATTRIBUTE = "_sentient_assist_connection_limits"
_MAX_WRAPPERS = 32  # middleware layers looked through for the app's Settings
# The share of the file-descriptor limit connections may hold: the rest is the agents' own
# connections, files and logs.
_DESCRIPTORS_FOR_CONNECTIONS = 0.75
# The shortest interval between two looks at a connection whose client does not read.
_MIN_WRITE_CHECK_SECONDS = 0.5
# A refused connection is shut for writing and read on (what it sends dropped) for at most this
# long or this many bytes before it is closed: closed with bytes unread, the kernel sends a reset,
# which can overtake the refusal, and the client reads a reset instead of its 431.
LINGER_SECONDS = 2.0
LINGER_MAX_BYTES = 1_048_576

logger = logging.getLogger("sentient_assist.server")


class ConnectionLimits(NamedTuple):
    """What BoundedHttpToolsProtocol holds each connection to, from the served app's Settings."""

    max_header_bytes: int
    header_timeout: float
    max_connections: int  # ASSIST_MAX_CONNECTIONS, or less under a low file-descriptor limit
    max_unread_body_bytes: int  # of a body its request's answer went out before: ASSIST_MAX_BODY_BYTES
    max_write_stall: float  # seconds a response may wait on a client that takes nothing: ASSIST_REQUEST_TIMEOUT


def connection_limits(config: Config) -> ConnectionLimits:
    """The limits of the app `config` serves (the environment's if it holds no Settings), worked
    out once per Config and loaded app."""
    app = getattr(config, "loaded_app", None)
    cached = vars(config).get(_LIMITS_ATTRIBUTE)
    if cached is not None and cached[0] is app:
        limits: ConnectionLimits = cached[1]
        return limits
    settings = settings_of(app) or load_settings()
    limits = ConnectionLimits(
        max_header_bytes=settings.max_header_bytes,
        header_timeout=settings.header_timeout,
        max_connections=_connections_the_descriptors_allow(settings.max_connections),
        max_unread_body_bytes=settings.max_body_bytes,
        max_write_stall=settings.request_timeout,
    )
    # The app too: a Config loaded again (a new factory app) gets its limits afresh.
    setattr(config, _LIMITS_ATTRIBUTE, (app, limits))
    return limits


def _connections_the_descriptors_allow(max_connections: int) -> int:
    try:
        import resource
    except ImportError:  # no such limit (Windows)
        return max_connections
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return max_connections
    allowed = max(1, int(soft * _DESCRIPTORS_FOR_CONNECTIONS))
    if allowed >= max_connections:
        return max_connections
    logger.warning(
        "%s=%d is more than this process's file-descriptor limit (%d) leaves for connections: "
        "at most %d are held; raise the limit (ulimit -n) to hold more",
        env_name("max_connections"),
        max_connections,
        soft,
        allowed,
    )
    return allowed


def uvicorn_is_exiting() -> bool:
    """Whether the uvicorn Server serving this process has been told to exit (SIGTERM, SIGINT).
    False under another server.

    uvicorn offers no public way to learn it before the lifespan's shutdown, which comes only
    once the connections are done. Its Server installs its bound `handle_exit` as the SIGTERM
    handler (with signal.signal, in every process it serves from, workers included), and that
    sets the Server's `should_exit`.
    """
    server = getattr(signal.getsignal(signal.SIGTERM), "__self__", None)
    return isinstance(server, Server) and server.should_exit


def settings_of(app: object) -> Settings | None:
    """The Settings the service's app was built with (`app.state.settings`), looking through
    the ASGI middleware wrapped around it (`.app`: uvicorn's own, and most); None if it has none."""
    for _ in range(_MAX_WRAPPERS):
        if app is None:
            return None
        state = getattr(app, "state", None)
        settings = getattr(state, "settings", None) if state is not None else None
        if isinstance(settings, Settings):
            return settings
        app = getattr(app, "app", None)
    return None


class BoundedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, with a deadline in every state of a connection, the header
    block of each request bounded in bytes, and the connections of a server bounded in number.

    Header bytes are counted as they arrive while a request's headers are incomplete, and a read
    that completes them is counted to the block's end before it is parsed: a block past the
    limit is refused whether it comes in one read or many, and what is held while headers
    arrive is bounded by the limit plus one read. The body of a request already answered is
    counted as it arrives too.
    """

    # Slots, not attributes: uvicorn's protocol keeps its state in an instance dict that these
    # would make grow past its size (1.6 KB more per connection, measured).
    __slots__ = (
        "_lingering",
        "_unserved_bytes",
        "_awaiting_headers",
        "_requests_read",
        "_deadline",
        "_write_deadline",
        "_paused_at",
        "_extensions",
        "_limits",
    )

    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self._limits = connection_limits(config)  # one per Config, shared by its connections
        # Bytes taken while no request is served: header bytes, or the body of an answered request.
        self._unserved_bytes = 0
        self._awaiting_headers = True
        self._requests_read = 0
        # While no request is served: the time its headers have, or the keep-alive after an answer.
        self._deadline: asyncio.TimerHandle | None = None
        self._write_deadline: asyncio.TimerHandle | None = None  # while the client takes nothing
        self._paused_at = 0.0
        self._extensions: dict[str, dict[object, object]] | None = None  # its requests' scope["extensions"]
        self._lingering = -1  # refused: the bytes read since (`_refuse`); -1 while not

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > self._limits.max_connections:
            # Closed at once: it has sent nothing yet, and a flood of them must not hold descriptors.
            self._refuse(
                503, f"The server holds its limit of {self._limits.max_connections} connections.", linger=False
            )
            return
        self._start_deadline(self._limits.header_timeout)

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_deadline()
        self._stop_write_deadline()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._lingering >= 0:
            self._lingering += len(data)
            if self._lingering > LINGER_MAX_BYTES:
                self.transport.close()
            return
        awaiting, requests_read = self._awaiting_headers, self._requests_read
        # The body of a request whose answer is out: it must not put off the deadline that runs from the answer.
        cycle = self.cycle
        unasked = not awaiting and cycle is not None and cycle.response_complete
        if awaiting:
            if self._deadline is None:
                # The first byte of a request on a kept-alive connection.
                self._start_deadline(self._limits.header_timeout)
            # A read that ends the header block is measured to the block's end before the parser
            # sees it: a whole block in one read is held to the limit as one that comes in many.
            end = data.find(b"\r\n\r\n")
            if end >= 0 and self._unserved_bytes + end + 4 > self._limits.max_header_bytes:
                self._refuse(431, f"The request's headers are larger than {self._limits.max_header_bytes} bytes.")
                return
        super().data_received(data)
        # Only a read that was header bytes (or unasked body bytes) from start to end counts.
        if requests_read != self._requests_read or self.transport.is_closing():
            return
        if awaiting and self._awaiting_headers:
            self._unserved_bytes += len(data)
            max_header_bytes = self._limits.max_header_bytes
            if self._unserved_bytes > max_header_bytes:
                self._refuse(431, f"The request's headers are larger than {max_header_bytes} bytes.")
        elif unasked:
            self._unserved_bytes += len(data)
            if self._unserved_bytes > self._limits.max_unread_body_bytes:
                self.transport.close()  # not read on: its answer is out, and nobody asked for the rest

    def on_headers_complete(self) -> None:
        self._awaiting_headers = False
        self._unserved_bytes = 0
        self._stop_deadline()
        ours = self._extensions
        if ours is None:
            # One per connection, made for its first request (none for one that never sends any),
            # in the scope of each of its requests: nothing made per request.
            ours = self._extensions = {ABORT_EXTENSION: {"abort": self.transport.abort}}
        extensions = self.scope.get("extensions")
        if extensions is None:
            self.scope["extensions"] = ours
        else:
            extensions.update(ours)
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._requests_read += 1
        self._awaiting_headers = True  # the next request's headers, whenever they come
        self._unserved_bytes = 0  # the count of an unasked body, if there was one

    def on_response_complete(self) -> None:
        super().on_response_complete()
        cycle = self.cycle
        if cycle.more_body and cycle.response_complete and not self.transport.is_closing():
            # Answered before its body was read: the keep-alive deadline runs from the answer,
            # whatever comes after (uvicorn's own is put off by every byte).
            self._start_deadline(self.timeout_keep_alive)

    def pause_writing(self) -> None:
        super().pause_writing()
        if self._write_deadline is None:
            self._paused_at = self.loop.time()
            self._watch_write()

    def resume_writing(self) -> None:
        super().resume_writing()
        self._stop_write_deadline()

    def _start_deadline(self, seconds: float) -> None:
        self._stop_deadline()
        self._deadline = self.loop.call_later(seconds, self._deadline_passed)

    def _stop_deadline(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _deadline_passed(self) -> None:
        self._deadline = None
        if self.transport.is_closing():
            return
        if self.cycle is not None and not self.cycle.response_complete:
            return  # a response is still being written: its request's headers came in time
        if self._awaiting_headers:
            self._refuse(408, f"The request's headers did not arrive within {self._limits.header_timeout:g} seconds.")
        else:
            self.transport.close()  # still sending the body of a request answered a keep-alive timeout ago

    def _watch_write(self) -> None:
        self._write_deadline = self.loop.call_later(
            max(self.timeout_keep_alive, _MIN_WRITE_CHECK_SECONDS), self._write_stalled
        )

    def _stop_write_deadline(self) -> None:
        if self._write_deadline is not None:
            self._write_deadline.cancel()
            self._write_deadline = None

    def _write_stalled(self) -> None:
        """The client has taken nothing for a while: once the server has closed the connection
        (a response cut off, or over), nobody waits for the rest; before, the response is given
        up at the limit of a request's time."""
        self._write_deadline = None
        if self.transport.is_closing() or self.loop.time() - self._paused_at >= self._limits.max_write_stall:
            self.transport.abort()
        else:
            self._watch_write()

    def _refuse(self, status: int, message: str, *, linger: bool = True) -> None:
        """Answer `status` with `message`, and close the connection (`linger`: once the client
        has closed its side, or LINGER_SECONDS have passed)."""
        self._stop_deadline()
        body = message.encode("ascii")
        self.transport.write(
            _REFUSALS[status]
            + b"content-type: text/plain; charset=utf-8\r\ncontent-length: "
            + str(len(body)).encode("ascii")
            + b"\r\nconnection: close\r\n\r\n"
            + body
        )
        metrics.count_response(status)
        if not linger or not self.transport.can_write_eof():
            self.transport.close()
            return
        self.transport.write_eof()
        self._lingering = 0
        self.loop.call_later(LINGER_SECONDS, self.transport.close)
