"""Where a facade run happens: in this process, or on a service over HTTP (http_transport.py,
imported only when an Agent is given a URL). Both yield wire events."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any, Protocol
from urllib.parse import urlsplit, urlunsplit

from ulid import ULID

from sentient_assist.protocol.events import ResponseEvent
from sentient_assist.protocol.request import Query, SessionObject
from sentient_assist.runtime.agent import AbstractAgent
from sentient_assist.runtime.request_context import current_request_id
from sentient_assist.runtime.run import Run, RunStats
from sentient_assist.runtime.session import Session
from sentient_assist.runtime.watcher import RunWatcher


class Transport(Protocol):
    def events(self, query: Query, session: SessionObject) -> AsyncGenerator[Any, None]:
        """The wire events of one run, ending with `done`; closing it early stops the agent."""
        ...


class InProcessTransport:
    """Runs the agent here, through the same runtime the server uses."""

    def __init__(self, agent: AbstractAgent, timeout: float) -> None:
        self.agent = agent
        self._watcher = RunWatcher(time_limit=timeout)

    async def events(self, query: Query, session: SessionObject) -> AsyncGenerator[Any, None]:
        # A sub-agent's run, inside another's, goes by the request id of the run that called it.
        stats = RunStats(current_request_id() or str(ULID()))
        run: Run[ResponseEvent] = Run(self.agent, Session(session), query, watcher=self._watcher, stats=stats)
        try:
            async for batch in run.batches():
                for event in batch:
                    yield event
        finally:
            run.reader_left()


def without_credentials(url: str) -> str:
    """The URL without any user:password@ part."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit(parts._replace(netloc=host))
