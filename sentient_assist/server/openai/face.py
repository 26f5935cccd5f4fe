"""The served agent behind OpenAI's chat-completions API: `POST /v1/chat/completions` (streaming
or not) and `GET /v1/models`, for the openai SDKs, Open WebUI, LibreChat and curl.

    request -> the app's middleware -> FastAPI's router -> the admitted route (server/admission.py):
    the key (401); for a chat, a place under ASSIST_MAX_STREAMS (503) and the body's size and
    time (413, 408), as for every face -> FastAPI reads and validates the body (400) -> `OpenAIFace.chat_completions`:
    the model (404), the messages -> query and session (400), a pause answered once (409)
    -> the same Run as /assist's, its events read by sentient_assist/server/openai/answer.py
    -> chunks (EventStream) or one completion

It is the same service as /assist, not a second one: the same `Service`'s keys, stream
budget (one ASSIST_MAX_STREAMS for both), body limits, time limit, keepalive pings (SSE
comments, which OpenAI clients skip), disconnect-cancels and shutdown grace. Every refusal,
and every `error` event, is an OpenAI error object (sentient_assist/server/openai/errors.py).

Choices where OpenAI's API and an agent differ (docs/openai.md has them all):

- `GET /v1/models` lists one model, the served agent's name; nothing exposes an agent's
  sub-agents by name (they are the agent's to call). A `model` that names anything else is a
  404 `model_not_found`, `param: "model"`.
- The agent decides how it answers: temperature, max_tokens, tools, response_format and the
  other sampling fields are accepted and ignored, and so are system (developer) messages.
  `n` other than 1 is a 400; content parts other than text (images, audio, files) are a 400
  naming the part in the query, and a placeholder ("[image omitted]") in the history.
- A pause (ASK_USER, INTERRUPT) is the question as content, its token riding along
  (sentient_assist/server/openai/pauses.py): the user's next message answers it, and resumes the run.
- `finish_reason` is always "stop" (never "tool_calls"); ids are `chatcmpl-<ULID>`;
  `system_fingerprint` is left out.
- An error of a run (the agent has run) says `x-should-retry: false`, which the openai SDKs
  obey: their default retries would run the agent again. Other paths under the prefix are a
  404 `unknown_url`, other methods a 405, both in OpenAI's shape.
"""

from __future__ import annotations

import asyncio
import logging
import time
from functools import partial
from typing import Any

from fastapi import APIRouter, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException
from starlette.responses import Response
from starlette.routing import Match
from starlette.types import Receive, Scope, Send
from ulid import ULID

from sentient_assist.runtime.errors import InputError
from sentient_assist.runtime.pauses import PauseRefused, Resumption, claim, pause_holder
from sentient_assist.runtime.run import RunOutcome
from sentient_assist.runtime.run_input import NO_RUN_INPUT, RunInput
from sentient_assist.server import metrics
from sentient_assist.server.admission import caller_of
from sentient_assist.server.event_stream import (
    MEDIA_TYPE,
    EventStream,
    PendingRun,
    listen_for_the_client_leaving,
    survive_cut_off,
)
from sentient_assist.server.face import Face
from sentient_assist.server.openai.answer import AnswerHook, ChunkWriter, Completion, error_status
from sentient_assist.server.openai.errors import (
    MODEL_NOT_FOUND,
    NO_RETRY,
    JSONAnswer,
    error_response,
    from_http_exception,
    from_input_error,
    from_validation_error,
    method_not_allowed,
    unknown_url,
)
from sentient_assist.server.openai.request import ChatCompletionRequest, conversation_of
from sentient_assist.server.routes import get_and_head
from sentient_assist.server.service import Service

OPENAI_PREFIX = "/v1"
CHAT_COMPLETIONS_PATH = "/chat/completions"
MODELS_PATH = "/models"
OWNED_BY = "sentient-assist"
SERVED = f"POST {CHAT_COMPLETIONS_PATH.lstrip('/')} and GET {MODELS_PATH.lstrip('/')} under its OpenAI prefix"
ALL_METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
ALREADY_ANSWERED = "pause_already_answered"  # the error's code: the chat's last pause was answered before

logger = logging.getLogger("sentient_assist.server")

_ERROR_SCHEMA = {
    "type": "object",
    "properties": {
        "error": {
            "type": "object",
            "properties": {
                "message": {"type": "string"},
                "type": {"type": "string"},
                "param": {"type": ["string", "null"]},
                "code": {"type": ["string", "null"]},
            },
        }
    },
}
_ERROR = {"content": {"application/json": {"schema": _ERROR_SCHEMA}}}
CHAT_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "A `chat.completion`; with `stream: true`, Server-Sent Events: one "
        "`chat.completion.chunk` per `data:` line, the last line `data: [DONE]`.",
        "content": {MEDIA_TYPE: {"schema": {"type": "string"}}},
    },
    400: {"description": "The body is not a chat request this service can answer; `param` names the field.", **_ERROR},
    401: {"description": "ASSIST_API_KEYS is set and the request has no valid `Authorization: Bearer` key.", **_ERROR},
    404: {"description": "`model` is not the served agent (`model_not_found`).", **_ERROR},
    408: {"description": "The body did not arrive in full within ASSIST_BODY_TIMEOUT seconds.", **_ERROR},
    409: {"description": "The pause the chat answers was answered already (`pause_already_answered`).", **_ERROR},
    413: {"description": "The body is larger than ASSIST_MAX_BODY_BYTES.", **_ERROR},
    503: {"description": "At ASSIST_MAX_STREAMS (both faces count), or shutting down; see `Retry-After`.", **_ERROR},
}


class OpenAIFace(Face):
    """`/v1/chat/completions` and `/v1/models` for the agent of a service, under its limits."""

    title = "/v1"

    def __init__(self, service: Service) -> None:
        super().__init__(service)
        self.created = int(time.time())  # the model's `created`: when the service started serving it

    def router(self, path: str = OPENAI_PREFIX) -> APIRouter:
        """A router holding the face's routes under `path`; include it in any FastAPI app,
        next to /assist's."""
        router = APIRouter(prefix=path, tags=["OpenAI-compatible"])
        self.add_route(
            router,
            CHAT_COMPLETIONS_PATH,
            self.chat_completions,
            name="chat_completions",
            summary="Ask the agent, as OpenAI's chat completions API asks a model",
            response_class=JSONResponse,
            responses=CHAT_RESPONSES,
        )
        # GET and HEAD (sentient_assist/server/routes.py); the schema shows GET.
        keyed = {"dependencies": self.security, "route_class_override": self.keyed_route}
        get_and_head(
            router,
            MODELS_PATH,
            self.list_models,
            name="list_models",
            summary="The served agent, as OpenAI's model list",
            responses={401: CHAT_RESPONSES[401]},
            **keyed,
        )
        get_and_head(
            router,
            MODELS_PATH + "/{model}",
            self.retrieve_model,
            name="retrieve_model",
            summary="The served agent, if `model` names it",
            responses={401: CHAT_RESPONSES[401], 404: CHAT_RESPONSES[404]},
            **keyed,
        )
        # Last: the other routes' 405s come first, and it gives way to any route of the app.
        router.add_api_route(
            "/{path:path}",
            _unknown_url,
            methods=ALL_METHODS,
            name="openai_unknown_url",
            include_in_schema=False,
            route_class_override=UnknownURLRoute,
        )
        return router

    def refusal(self, refused: Exception) -> Response | None:
        """Every refusal, from the key check to FastAPI's validation of the body, as an OpenAI error object."""
        if isinstance(refused, RequestValidationError):
            return from_validation_error(refused)
        if isinstance(refused, InputError):
            return from_input_error(refused)
        if isinstance(refused, HTTPException):  # the body's limits, a body FastAPI could not parse, a dependency's
            return from_http_exception(refused)
        return None

    def method_not_allowed(self, allowed: set[str]) -> Response | None:
        return method_not_allowed(allowed)

    def _model(self) -> dict[str, Any]:
        return {"id": self.agent.name, "object": "model", "created": self.created, "owned_by": OWNED_BY}

    async def list_models(self) -> dict[str, Any]:
        """The models this service answers as: the served agent."""
        return {"object": "list", "data": [self._model()]}

    async def retrieve_model(self, model: str) -> dict[str, Any]:
        """The served agent, when `model` is its name."""
        self._check_model(model)
        return self._model()

    def _check_model(self, model: str) -> None:
        if model != self.agent.name:
            # Not quoting what was sent: the answer names what is served instead.
            raise InputError(
                "model",
                f"this service serves only the model {self.agent.name!r} (GET /v1/models lists it)",
                status=404,
                code=MODEL_NOT_FOUND,
            )

    async def _answer_once(self, resumed: Resumption, body: ChatCompletionRequest) -> Resumption:
        """The pause this chat answers, claimed as answered (the run takes it so) before the
        answer starts, so that a second answer to it is a 409 naming the message that holds
        the pause, streamed or not, rather than a stream's error line."""
        try:
            return await claim(resumed, self.service.sealer)
        except PauseRefused as refused:
            # The pause rode in the last assistant message (conversation_of reads only that one's).
            index = max(i for i, message in enumerate(body.messages) if message.role == "assistant")
            param = f"messages[{index}].content"
            raise InputError(param, str(refused), status=refused.status, code=ALREADY_ANSWERED) from None

    async def chat_completions(self, request: Request, body: ChatCompletionRequest) -> Response:
        """The agent's answer to the chat's last user message: a chat.completion, or its chunks."""
        agent, service = self.agent, self.service
        self._check_model(body.model)
        holder = pause_holder(caller_of(request.scope))
        query, session, resumed = conversation_of(body, agent.name, service.sealer, service.histories, holder)
        run_input = NO_RUN_INPUT if resumed is None else RunInput(resumed=await self._answer_once(resumed, body))
        completion_id, created = f"chatcmpl-{ULID()}", int(time.time())
        if body.stream:
            include_usage = body.stream_options is not None and body.stream_options.include_usage
            writer = ChunkWriter(completion_id, created, agent.name, include_usage=include_usage)
            return EventStream(self.pending_run(request, session, query, partial(AnswerHook, reader=writer), run_input))
        completion = Completion(completion_id, created, agent.name)
        pending = self.pending_run(request, session, query, partial(AnswerHook, reader=completion), run_input)
        return CompletionResponse(pending, completion)


class CompletionResponse(Response):
    """A run answered as one `chat.completion` once it has ended, or as the error object of its
    first `error` event, with that error's status. The run is the same as a stream's: its
    time limit, the shutdown grace and a client that leaves end it the same way."""

    def __init__(self, pending: PendingRun, completion: Completion) -> None:
        super().__init__()  # Response's own start (status 200, no body); the answer is its own response
        self._pending: PendingRun | None = pending
        self.stats = pending.stats
        self._completion = completion  # what the run's hook reads its events into

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        assert self._pending is not None, "a CompletionResponse is sent once"
        completion = self._completion
        run = self._pending.start()
        self._pending = None
        try:
            listener = listen_for_the_client_leaving(run, receive)
            try:
                # Everything the run sends is read into `completion`; only its end is awaited here.
                async for _ in run.batches():
                    if completion.too_long:  # what is kept is bounded: past it, an error, and the run ends
                        run.end_past_bound("completion")
            finally:
                listener.cancel()
            if not completion.ended or self.stats.outcome is RunOutcome.DISCONNECTED:
                return  # the client left: nobody to answer
            failure = completion.failure
            if failure is None:
                answer: Response = JSONAnswer(completion.body())
            else:
                # The agent has run: not to be retried by a client library on its own.
                answer = error_response(
                    failure.error_message, error_status(failure), code=str(failure.error_code), headers=NO_RETRY
                )
            await answer(scope, receive, send)
        except OSError:
            pass  # the client is gone
        except asyncio.CancelledError:
            if not run.cut_off:
                raise
            survive_cut_off("completion", self.stats.request_id, scope)  # the client did not take the answer
        finally:
            run.reader_left()
            metrics.observe_stream(self.stats)


async def _unknown_url() -> None:
    """Never called: UnknownURLRoute answers by itself."""


class UnknownURLRoute(APIRoute):
    """Any other path under the face's prefix (/v1/completions, /v1/embeddings): a 404
    `unknown_url` in OpenAI's shape rather than FastAPI's `{"detail": ...}`. It matches only
    partially, as a route does for a method it does not take: a route of the app that matches
    fully is still chosen, wherever it was added. A path ending in "/" is left to FastAPI (its
    redirect to the path without it)."""

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        match, child_scope = super().matches(scope)
        if match is Match.NONE or scope["path"].endswith("/"):
            return Match.NONE, {}
        return Match.PARTIAL, child_scope

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        await unknown_url(SERVED)(scope, receive, send)
