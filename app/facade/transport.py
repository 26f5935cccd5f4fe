"""Where a facade run happens: in this process, or on a service over HTTP. Both yield wire events."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from typing import Any, Protocol
from urllib.parse import urlsplit, urlunsplit

import httpx
from httpx_sse import aconnect_sse
from ulid import ULID

from app.protocol.events import DoneEvent, parse_event
from app.protocol.request import Query, SessionObject
from app.runtime.agent import AbstractAgent
from app.runtime.errors import RemoteAgentError
from app.runtime.request_context import current_request_id
from app.runtime.run import Run, RunStats
from app.runtime.session import Session
from app.runtime.watcher import RunWatcher


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
        run: Run[Any] = Run(self.agent, Session(session), query, watcher=self._watcher, stats=stats)
        try:
            while True:
                batch = run.take_ready()
                if batch is None:
                    await run.ready()
                    continue
                if not batch:
                    return
                for event in batch:
                    yield event
        finally:
            run.reader_left()


class HttpTransport:
    """Runs the agent on an /assist service, reading its SSE stream with httpx."""

    def __init__(self, url: str, api_key: str | None, timeout: float) -> None:
        self.url = url
        self._shown_url = without_credentials(url)  # for messages: never a user:password@
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        # Pings keep a live stream talking; a read that waits longer than this is a dead one.
        self._timeout = httpx.Timeout(10.0, read=timeout)

    async def events(self, query: Query, session: SessionObject) -> AsyncGenerator[Any, None]:
        body = {"query": query.model_dump(mode="json"), "session": session.model_dump(mode="json", by_alias=True)}
        async with httpx.AsyncClient(timeout=self._timeout) as client:
            try:
                async with aconnect_sse(client, "POST", self.url, json=body, headers=self._headers) as source:
                    response = source.response
                    if response.status_code != 200:
                        await response.aread()
                        raise RemoteAgentError(
                            f"{self._shown_url} answered {response.status_code}: {_detail(response)}",
                            response.status_code,
                        )
                    async for sse in source.aiter_sse():
                        try:
                            event = parse_event(sse.data)
                        except ValueError:
                            raise RemoteAgentError(f"{self._shown_url} sent an event that is not valid") from None
                        yield event
                        if isinstance(event, DoneEvent):
                            return
            except httpx.HTTPError as exc:
                raise RemoteAgentError(f"{self._shown_url}: {type(exc).__name__}") from exc
        raise RemoteAgentError(f"{self._shown_url}: the stream ended before done")


def _detail(response: httpx.Response) -> str:
    try:
        return json.dumps(response.json().get("detail"))
    except (ValueError, AttributeError):
        return response.text[:200]


def without_credentials(url: str) -> str:
    """The URL without any user:password@ part."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit(parts._replace(netloc=host))
