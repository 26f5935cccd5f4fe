"""A face written against the contract of sentient_assist/server/face.py and nothing else: its
own request body, its own wire format (one text line per event), its own refusals (plain text).
tests/server/test_faces.py mounts it on a service and checks that it is admitted, run, cut off
and logged as every face of the service is."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Request
from pydantic import BaseModel
from starlette.responses import PlainTextResponse, Response
from ulid import ULID

from sentient_assist.protocol.request import Query
from sentient_assist.runtime.run import ChannelHook
from sentient_assist.runtime.session import Session
from sentient_assist.server.event_stream import EventStream
from sentient_assist.server.face import Face

TINY_PATH = "/tiny"


class TinyQuestion(BaseModel):
    prompt: str


class TextLinesHook(ChannelHook[bytes]):
    """Each event as one line: its name, then its text (if it has one)."""

    __slots__ = ()

    def encode(self, event: object) -> bytes:
        content = getattr(event, "content", None)
        text = content if isinstance(content, str) else ""
        name = getattr(event, "event_name", "?")
        return f"{name}: {text}\n".encode()

    def size(self, item: bytes) -> int:
        return len(item)


class TinyFace(Face):
    title = "tiny"

    def router(self, path: str = TINY_PATH) -> APIRouter:
        router = APIRouter()
        self.add_route(router, path, self.ask, response_class=EventStream, name="tiny")
        return router

    async def ask(self, request: Request, body: TinyQuestion) -> Response:
        if not body.prompt.strip():
            raise HTTPException(400, "prompt: say something")
        session = Session.new(self.agent.name)
        return EventStream(self.pending_run(request, session, Query(id=ULID(), prompt=body.prompt), TextLinesHook))

    def refusal(self, refused: Exception) -> Response | None:
        if isinstance(refused, HTTPException):
            return PlainTextResponse(
                f"tiny refused: {refused.detail}", refused.status_code, dict(refused.headers or {})
            )
        return None
