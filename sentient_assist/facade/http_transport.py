"""An agent on an /assist service, run over HTTP: its SSE stream read with httpx, and resumed
when cut (the service's resumable runs, docs/resumable.md)."""

from __future__ import annotations

import asyncio
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

# A stream cut before `done` (a dropped connection, a proxy's idle cut) whose response named
# its run (`Assist-Run`: the service's ASSIST_DETACH_GRACE is on) is resumed, from the last
# event received: this many times in a row without an event between, a little later each time.
MAX_RESUMES = 5
RESUME_BACKOFF_SECONDS = (0.1, 0.25, 0.5, 1.0, 2.0)
RUN_HEADER = "assist-run"


class HttpTransport:
    """Runs the agent on an /assist service, reading its SSE stream with httpx; a stream cut
    mid-answer is resumed at GET <url>/runs/<handle> when the service keeps its runs, so the
    events read are those of an uncut run, each once, in order (docs/resumable.md)."""

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
        handle: str | None = None
        last_id: str | None = None
        failures = 0
        async with httpx.AsyncClient(timeout=self._timeout) as client:
            while True:
                if handle is None:
                    connect = aconnect_sse(client, "POST", self.url, json=body, headers=headers)
                else:
                    resume_headers = dict(headers, **({"Last-Event-ID": last_id} if last_id else {}))
                    connect = aconnect_sse(
                        client, "GET", f"{self.url.rstrip('/')}/runs/{handle}", headers=resume_headers
                    )
                try:
                    async with connect as source:
                        response = source.response
                        if response.status_code != 200:
                            await response.aread()
                            what = "the resume" if handle is not None else self._shown_url
                            raise RemoteAgentError(
                                f"{self._shown_url}: {what} answered {response.status_code}: {_detail(response)}",
                                response.status_code,
                            )
                        handle = handle or response.headers.get(RUN_HEADER)
                        async for sse in source.aiter_sse():
                            try:
                                event = parse_event(sse.data)
                            except ValueError:
                                raise RemoteAgentError(f"{self._shown_url} sent an event that is not valid") from None
                            last_id, failures = event.id, 0
                            yield event
                            if isinstance(event, DoneEvent):
                                return
                    cause = "the stream ended before done"
                except httpx.TransportError as exc:
                    cause = type(exc).__name__
                except httpx.HTTPError as exc:
                    raise RemoteAgentError(f"{self._shown_url}: {type(exc).__name__}") from exc
                if handle is None or failures >= MAX_RESUMES:
                    raise RemoteAgentError(f"{self._shown_url}: {cause}")
                await asyncio.sleep(RESUME_BACKOFF_SECONDS[failures])
                failures += 1


def _detail(response: httpx.Response) -> str:
    try:
        return json.dumps(response.json().get("detail"))
    except (ValueError, AttributeError):
        return response.text[:200]
