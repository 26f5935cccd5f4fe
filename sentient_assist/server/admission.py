"""The one admitted route: what a request to any face passes before the face's adapter sees it,
and what is kept for it until its answer has ended.

    request -> the app's middleware -> FastAPI's router -> AdmittedRoute: the key (401), its turn
    behind the runs still starting, the body's declared size (413), a place under
    ASSIST_MAX_STREAMS (503) -> the body, bounded in size and time (413, 408) -> FastAPI: the
    dependencies, the body's model, the face's endpoint -> the face's response -> the place left

A face (server/face.py) renders the refusals in its protocol's shape; everything else here is
the same for every face. Middleware, dependencies and exception handlers apply as to any path
operation: this is an `APIRoute`, and only what must come before FastAPI reads the body is done
before calling it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, ClassVar

import anyio
import orjson
from fastapi import HTTPException, Request
from fastapi.routing import APIRoute
from starlette.datastructures import Headers
from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from sentient_assist.runtime.errors import InputError
from sentient_assist.runtime.run import RunStats
from sentient_assist.runtime.watcher import WatchedRun
from sentient_assist.server.event_stream import abort_connection
from sentient_assist.server.limits import CLIENT_CLOSED_REQUEST, StreamGate
from sentient_assist.server.open_streams import CUT_OFF_AFTER_SECONDS
from sentient_assist.server.request_id import STATE_REQUEST_ID, request_id_of
from sentient_assist.server.service import declares_json

if TYPE_CHECKING:
    from sentient_assist.server.face import Face

# Where the access log finds a request's agent and run (request.state is scope["state"]).
STATE_AGENT, STATE_STATS = "assist_agent", "assist_stats"
STATE_PLACE = "assist_place"
# After its time limit, what a request whose answer a protocol's SDK writes has to send it
# before it is cut off: its runs end at the limit (the watcher ticks up to half a second late)
# and a client that reads takes the answer at once. One that does not holds no place past this.
WRITE_GRACE_SECONDS = CUT_OFF_AFTER_SECONDS + 1.5

logger = logging.getLogger("sentient_assist.server")


class Place:
    """A request's place under ASSIST_MAX_STREAMS, held from its headers until its answer and
    every run it started that outlives the answer (an A2A task) have ended; and what the access
    log says of it: the agent, and the request's first run."""

    __slots__ = ("_gate", "owner", "_holds", "_state")

    def __init__(self, gate: StreamGate, owner: str, state: dict[str, Any]) -> None:
        self._gate = gate
        self.owner = owner  # whose share of the places it is, and whose runs: a key's ("" without keys)
        self._holds = 1  # the request's own
        self._state = state

    def started(self, run: WatchedRun) -> None:
        """A run of this request has started: the place is held until it ends too (`ended`)."""
        self._holds += 1
        self._state.setdefault(STATE_STATS, run.stats)

    def ended(self, run: WatchedRun) -> None:
        self._release()

    def request_ended(self) -> None:
        self._release()

    def _release(self) -> None:
        self._holds -= 1
        if self._holds == 0:
            self._gate.leave(self.owner)


def place_of(scope: Scope) -> Place | None:
    """The place of the admitted request of `scope`; None for a request no AdmittedRoute took."""
    place = (scope.get("state") or {}).get(STATE_PLACE)
    return place if isinstance(place, Place) else None


def caller_of(scope: Scope) -> str:
    """Whose request it is, for the pauses its runs make: its key's owner ("" without keys, or
    for a request no AdmittedRoute took)."""
    place = place_of(scope)
    return "" if place is None else place.owner


def run_stats_for(request: Request, agent_name: str) -> RunStats:
    """The stats of the run a face starts for `request`, where its access-log line finds them;
    and the request's body, read and parsed already, let go: the run holds what it needs."""
    stats = RunStats(request_id_of(request))
    state = request.scope.setdefault("state", {})
    state[STATE_AGENT] = agent_name
    state[STATE_STATS] = stats
    forget_body(request)
    return stats


class KeyedRoute(APIRoute):
    """A route of a face that only needs the key (a list of models): checked before anything
    else; every refusal, from the key check to FastAPI's validation of the body, in the face's
    shape. Made per face (`Face.keyed_route`, `Face.admitted_route`): `face` is that face."""

    face: ClassVar[Face]

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = self.body_handler()
        face = self.face

        async def answer_refusals_in_the_face_shape(request: Request) -> Response:
            try:
                return await handler(request)
            except Exception as refused:  # the face's own input error, FastAPI's, a dependency's
                answer = face.refusal(refused)
                if answer is not None:
                    return answer
                if isinstance(refused, InputError):  # answered by the app's handlers: {"detail": "field: reason"}
                    raise HTTPException(refused.status, refused.message) from None
                raise

        return answer_refusals_in_the_face_shape

    def body_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        """FastAPI's handler of the request: its body, its dependencies, the endpoint."""
        return super().get_route_handler()

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        face = self.face
        if scope["method"] not in (self.methods or ()):
            await self._not_allowed(scope, receive, send)
            return
        try:
            face.service.check_caller(scope, Headers(scope=scope))
        except HTTPException as refused:
            await self._refuse(refused, scope, receive, send)
            return
        await super().handle(scope, receive, send)

    async def _not_allowed(self, scope: Scope, receive: Receive, send: Send) -> None:
        answer = self.face.method_not_allowed(self.methods or set())
        if answer is None:
            await super().handle(scope, receive, send)  # FastAPI's 405
        else:
            await answer(scope, receive, send)

    async def _refuse(self, refused: HTTPException, scope: Scope, receive: Receive, send: Send) -> None:
        answer = self.face.refusal(refused)
        if answer is None:
            raise refused  # the app's exception handlers answer it
        await answer(scope, receive, send)


class AdmittedRoute(KeyedRoute):
    """The route of every face's request that may run the agent: the key, the body's declared
    size and a place under ASSIST_MAX_STREAMS before FastAPI reads the body; the body bounded in
    size and time; the place held until the answer ends (`Place`). A JSON body is parsed once,
    by orjson (`json_of`); a face whose SDK reads the body itself
    (`Face.reads_body_whole`) is handed it whole, and its answer is bounded by the time limit."""

    def body_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().body_handler()
        if self.face.reads_body_whole:
            return handler

        async def read_json_with_orjson(request: Request) -> Response:
            # FastAPI reads a JSON body with `await request.json()` (json.loads, cached by the
            # request). Read here first into the same objects (`json_of`: orjson, about half
            # json.loads' time on a 1 MB history). A body FastAPI would not read as JSON, or
            # that json.loads refuses, is left to FastAPI to answer for.
            if declares_json(request.headers.get("content-type")):
                try:
                    raw = await request.body()
                except HTTPException:
                    raise
                except Exception:
                    return await handler(request)
                if raw:
                    try:
                        vars(request)["_json"] = json_of(raw)
                    except RecursionError:  # FastAPI's answer would name nothing
                        raise InputError("body", "nested too deep to be read") from None
                    except Exception:
                        pass
            return await handler(request)

        return read_json_with_orjson

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        face = self.face
        if scope["method"] not in (self.methods or ()):
            await self._not_allowed(scope, receive, send)
            return
        service = face.service
        try:
            body, owner = await service.admit(scope, receive)
        except HTTPException as refused:
            await self._refuse(refused, scope, receive, send)
            return
        state = scope.setdefault("state", {})
        place = state[STATE_PLACE] = Place(service.gate, owner, state)
        state[STATE_AGENT] = service.agent.name
        try:
            if not face.reads_body_whole:
                await super(KeyedRoute, self).handle(scope, body, send)
                return
            try:
                whole = await read_whole_body(body)
            except HTTPException as refused:
                if refused.status_code != CLIENT_CLOSED_REQUEST:  # else nobody is there to answer
                    await self._refuse(refused, scope, receive, send)
                return
            replayed = Replayed(whole, body)
            del whole  # the replay lets go of it once read: an SDK's call may last minutes
            # anyio's scope, not asyncio's: the SDKs answer from anyio task groups.
            with anyio.move_on_after(service.streams.time_limit + WRITE_GRACE_SECONDS) as bounded:
                await super(KeyedRoute, self).handle(scope, replayed, send)
            if bounded.cancelled_caught:
                abort_connection(scope)
                logger.warning(
                    "%s answer cut off past its time limit (request %s)", face.title, state.get(STATE_REQUEST_ID)
                )
        finally:
            place.request_ended()


async def read_whole_body(receive: Receive) -> bytes:
    """The body, whole, from a `receive` that bounds it (LimitedBody: 413, 408, 499)."""
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


class Replayed:
    """The body, read already, as the one message of a `receive`; then the client's own messages
    (its leaving), which the SDKs' streams listen for."""

    __slots__ = ("_first", "_receive")

    def __init__(self, body: bytes, receive: Receive) -> None:
        self._first: Message | None = {"type": "http.request", "body": body, "more_body": False}
        self._receive = receive

    async def __call__(self) -> Message:
        first, self._first = self._first, None
        if first is not None:
            return first
        return await self._receive()


def forget_body(request: Request) -> None:
    """Drop the bytes and the JSON `request` cached on the way to the body's model: the request
    object lives as long as the stream, and they are not needed again."""
    vars(request).pop("_json", None)
    vars(request).pop("_body", None)


# orjson reads an integer past 64 bits as a float, where json.loads keeps it whole: a run of
# 19 digits or more, found as 19 zeros once every digit is a zero (in C: a regular expression
# takes 10 times as long).
_DIGITS_AS_ZEROS = bytes.maketrans(b"0123456789", b"0" * 10)
_LONG_NUMBER = b"0" * 19


def json_of(raw: bytes) -> Any:
    """`json.loads(raw)`, as Starlette's `request.json()` reads a body, in about half the
    time when orjson can tell: it refuses what json.loads reads otherwise (NaN, a lone
    surrogate, a BOM, UTF-16, nesting past 1,024, a float past its range), and a run of 19
    digits, where it would read an integer other than json.loads does, is left to json.loads."""
    if raw.translate(_DIGITS_AS_ZEROS).find(_LONG_NUMBER) < 0:
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass
    return json.loads(raw)
