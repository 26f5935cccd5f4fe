"""An agent on an /assist service, run over HTTP: its SSE stream read with httpx."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from typing import Any

import httpx
from httpx_sse import aconnect_sse

from sentient_assist.facade.transport import without_credentials
from sentient_assist.protocol.events import DoneEvent, parse_event
from sentient_assist.protocol.request import Query, SessionObject
from sentient_assist.runtime.errors import RemoteAgentError
from sentient_assist.tracing import current_tracing


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
        headers = self._headers
        if current_tracing() is not None:
            # The remote agent's spans join this run's trace: its span is the parent of theirs.
            from sentient_assist.runtime.tracing import inject_current

            headers = dict(headers)
            inject_current(headers)
        async with httpx.AsyncClient(timeout=self._timeout) as client:
            try:
                async with aconnect_sse(client, "POST", self.url, json=body, headers=headers) as source:
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
