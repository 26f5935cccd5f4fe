"""The responses of resumable runs: POST /assist's (the run starts, `Assist-Run` names it) and
GET /assist/runs/<handle>'s (the run from a cursor on). Both write the frames of a FrameSource
as they come, all that are ready in one write, with a keepalive ping after a silent
interval, and stop at `done` or when the client leaves (the run goes on).

A reader is served for at most the run's time limit and a second (a run lasts no longer): a
writer stuck on a client that does not read is then cut off, its connection aborted.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from sentient_assist.protocol.request import Query
from sentient_assist.runtime.agent import AbstractAgent
from sentient_assist.runtime.pauses import PauseSealer
from sentient_assist.runtime.run import Run, RunStats
from sentient_assist.runtime.session import Session
from sentient_assist.server.event_stream import (
    LISTENER_TASK_NAME,
    PING_FRAME,
    SSE_HEADERS,
    abort_connection,
    survive_cut_off,
)
from sentient_assist.server.runs.keeper import DetachedRuns
from sentient_assist.server.runs.kept import Item, KeptRun
from sentient_assist.server.runs.source import FrameSource

logger = logging.getLogger("sentient_assist.server")

CUT_OFF_AFTER_SECONDS = 1.0
RUN_HEADER_BYTES = b"assist-run"


async def _wait_for_the_client_leaving(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


async def write_frames(
    source: FrameSource, scope: Scope, receive: Receive, send: Send, *, ping: float, serve_for: float, what: str
) -> None:
    """Write what `source` gives until its end (or the client leaves), then end the body."""
    listener = asyncio.ensure_future(_wait_for_the_client_leaving(receive))
    listener.add_done_callback(lambda _: source.close())
    try:
        async with asyncio.timeout(serve_for):
            while True:
                batch = await source.next_batch(ping)
                if batch is None:
                    await send({"type": "http.response.body", "body": PING_FRAME, "more_body": True})
                    continue
                if not batch:
                    break
                body = batch[0] if len(batch) == 1 else b"".join(batch)
                await send({"type": "http.response.body", "body": body, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})
    except OSError:
        pass  # the client is gone
    except TimeoutError:
        abort_connection(scope)
        logger.warning("%s cut off: its client stopped reading", what)
    finally:
        listener.cancel()
        source.close()


class ResumableEventStream(Response):
    """POST /assist's response when runs are resumable: its body is the plain stream's, byte for
    byte, plus the `Assist-Run` header. While its client is there, it reads the run itself, as
    EventStream does (no task between the agent and the client), keeping each batch for the
    resumes before it writes it; when its client leaves, a task of the runs reads on."""

    media_type = None

    def __init__(
        self,
        runs: DetachedRuns,
        agent: AbstractAgent,
        session: Session,
        query: Query,
        stats: RunStats,
        sealer: PauseSealer | None,
        authorization: str | None,
        handle: str,
    ) -> None:
        super().__init__()  # Response's own start (status 200, no body); the headers are the stream's
        self.raw_headers = list(SSE_HEADERS)
        self._runs = runs
        self._start: Callable[[], tuple[KeptRun, Run[Item]]] | None = lambda: runs.begin(
            agent, session, query, stats, sealer, authorization, handle
        )
        self.stats = stats

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        assert self._start is not None, "a ResumableEventStream is sent once"
        kept, run = self._start()
        self._start = None
        runs = self._runs
        left = False  # the client left: the run goes on without this response
        ended = False  # all of the run was taken

        def client_left(listener: asyncio.Future[Any]) -> None:
            nonlocal left
            if not listener.cancelled():
                left = True
                run.wake_reader()

        # The body has been read: the next message can only be the client leaving.
        listener = asyncio.ensure_future(receive())
        listener.set_name(LISTENER_TASK_NAME)
        listener.add_done_callback(client_left)
        try:
            await runs.share(kept)
            headers = [*self.raw_headers, (RUN_HEADER_BYTES, kept.handle.encode())]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            while not left:
                batch = runs.take(kept, run)
                if batch is None:
                    await run.ready()
                    if left:
                        break
                    batch = runs.take(kept, run)
                    if batch is None:  # woken for a keepalive
                        await send({"type": "http.response.body", "body": PING_FRAME, "more_body": True})
                        continue
                if not batch:
                    ended = True
                    break
                body = batch[0][1] if len(batch) == 1 else b"".join(item[1] for item in batch)
                del batch
                await send({"type": "http.response.body", "body": body, "more_body": True})
            if ended:
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        except OSError:
            pass  # the client is gone (servers that raise on a send after a disconnect)
        except asyncio.CancelledError:
            if not run.cut_off:
                raise
            ended = True  # cut off only once the run has ended
            runs.take(kept, run)  # its end, kept for a resume
            survive_cut_off("stream", self.stats.request_id, scope)
        finally:
            listener.cancel()
            if ended:
                kept.readers -= 1
                runs.finish(kept, run)
            else:
                runs.read_detached(kept)
                runs.detach(kept)


class ResumedStream(Response):
    """GET /assist/runs/<handle>'s response: the run's frames from a cursor on. `on_end` runs
    when it ends, however (the place it held under ASSIST_MAX_STREAMS is given back)."""

    media_type = None

    def __init__(
        self,
        runs: DetachedRuns,
        handle: str,
        source: FrameSource,
        on_end: Callable[[], Any],
        kept: KeptRun | None = None,
    ) -> None:
        super().__init__()  # Response's own start (status 200, no body); the headers are the stream's
        self.raw_headers = [*SSE_HEADERS, (RUN_HEADER_BYTES, handle.encode())]
        self._runs = runs
        self._source = source
        self._on_end = on_end
        self._kept = kept
        self._sent = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        assert not self._sent, "a ResumedStream is sent once"
        self._sent = True
        try:
            await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
            await write_frames(
                self._source,
                scope,
                receive,
                send,
                ping=self._runs.ping_interval,
                serve_for=self._runs.time_limit + CUT_OFF_AFTER_SECONDS,
                what="resumed stream",
            )
        finally:
            if self._kept is not None:
                self._runs.detach(self._kept)
            self._on_end()
