"""The HTTP protocol the service runs uvicorn with: uvicorn's own (httptools), with a bound on a
request's header block and a deadline for it.

uvicorn's httptools protocol takes a header block of any size and any slowness: one connection
can feed it headers until the process runs out of memory, and a thousand connections sending a
header line a second hold their file descriptors for ever. Here a request's header block is cut
at ASSIST_MAX_HEADER_BYTES (431) and must arrive within ASSIST_HEADER_TIMEOUT seconds of the
connection, or of the first byte after the previous response (408); then the connection is
closed. `assist serve` and DefaultServer use it; with uvicorn's own command line, pass
`--http sentient_assist.server.protocol:BoundedHttpToolsProtocol`.

The two limits are the Settings of the app the server serves (`create_app`'s `app.state.settings`,
found through uvicorn's `config.loaded_app` and the middleware around it), so that each server
keeps its own app's, in the process that built the app (--workers and --reload children too).
An app that holds no Settings (one of your own, with add_routes) gets the environment's.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.config import Config
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

from sentient_assist.server import metrics
from sentient_assist.server.settings import Settings, load_settings

_REFUSALS = {
    408: b"HTTP/1.1 408 Request Timeout\r\n",
    431: b"HTTP/1.1 431 Request Header Fields Too Large\r\n",
}


# Where a Config keeps the limits worked out for the app it loaded (Config has no slots).
_LIMITS_ATTRIBUTE = "_sentient_assist_header_limits"
_MAX_WRAPPERS = 32  # middleware layers looked through for the app's Settings


def header_limits(config: Config) -> tuple[int, float]:
    """ASSIST_MAX_HEADER_BYTES and ASSIST_HEADER_TIMEOUT of the app `config` serves (the
    environment's if it holds no Settings), worked out once per Config and loaded app."""
    app = getattr(config, "loaded_app", None)
    cached = vars(config).get(_LIMITS_ATTRIBUTE)
    if cached is not None and cached[0] is app:
        limits: tuple[int, float] = cached[1]
        return limits
    settings = settings_of(app) or load_settings()
    limits = (settings.max_header_bytes, settings.header_timeout)
    # The app too: a Config loaded again (a new factory app) gets its limits afresh.
    setattr(config, _LIMITS_ATTRIBUTE, (app, limits))
    return limits


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
    """uvicorn's httptools protocol, with the header block of each request bounded in bytes and time.

    Bytes are counted as they arrive while a request's headers are incomplete: a read that
    completes them (or that ends a request) is not counted, so a request may carry up to one
    read more than the limit, and what is held while headers arrive is bounded by the limit
    plus one read.
    """

    # Slots, not attributes: uvicorn's protocol keeps its state in an instance dict that these
    # would make grow past its size (1.6 KB more per connection, measured).
    __slots__ = ("_header_bytes", "_awaiting_headers", "_requests_read", "_header_deadline", "_limits")

    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self._limits = header_limits(config)  # one tuple per Config, shared by its connections
        self._header_bytes = 0
        self._awaiting_headers = True
        self._requests_read = 0
        self._header_deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._start_header_deadline()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_header_deadline()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        awaiting, requests_read = self._awaiting_headers, self._requests_read
        if awaiting and self._header_deadline is None:
            self._start_header_deadline()  # the first byte of a request on a kept-alive connection
        super().data_received(data)
        # Only a read that was header bytes from start to end counts.
        if (
            awaiting
            and self._awaiting_headers
            and requests_read == self._requests_read
            and not self.transport.is_closing()
        ):
            self._header_bytes += len(data)
            max_header_bytes = self._limits[0]
            if self._header_bytes > max_header_bytes:
                self._refuse(431, f"The request's headers are larger than {max_header_bytes} bytes.")

    def on_headers_complete(self) -> None:
        self._awaiting_headers = False
        self._header_bytes = 0
        self._stop_header_deadline()
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._requests_read += 1
        self._awaiting_headers = True  # the next request's headers, whenever they come

    def _start_header_deadline(self) -> None:
        self._header_deadline = self.loop.call_later(self._limits[1], self._headers_too_slow)

    def _stop_header_deadline(self) -> None:
        if self._header_deadline is not None:
            self._header_deadline.cancel()
            self._header_deadline = None

    def _headers_too_slow(self) -> None:
        self._header_deadline = None
        if self._awaiting_headers and not self.transport.is_closing():
            if self.cycle is not None and not self.cycle.response_complete:
                return  # a response is still being written: its request's headers came in time
            self._refuse(408, f"The request's headers did not arrive within {self._limits[1]:g} seconds.")

    def _refuse(self, status: int, message: str) -> None:
        """Answer `status` with `message`, and close the connection."""
        self._stop_header_deadline()
        body = message.encode("ascii")
        self.transport.write(
            _REFUSALS[status]
            + b"content-type: text/plain; charset=utf-8\r\ncontent-length: "
            + str(len(body)).encode("ascii")
            + b"\r\nconnection: close\r\n\r\n"
            + body
        )
        self.transport.close()
        metrics.count_response(status)
