"""OpenAIChatModel: any OpenAI-compatible chat-completions endpoint, streamed.

One class for OpenAI, Fireworks, Together, Groq, OpenRouter, vLLM, LM Studio and
Ollama: they differ only in `base_url`, key and model name.

The stream is read with aiohttp, line by line, and each chunk parsed with orjson: the openai
SDK's per-chunk pydantic models and HTTP stack cost more than twice as much CPU per token
(bench/llm_stream_micro.py). Retries and their delays follow the openai client's.
"""

from __future__ import annotations

import asyncio
import email.utils
import logging
import math
import os
import random
import time
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import aiohttp
import orjson
from aiohttp.helpers import get_env_proxy_for_url
from yarl import URL

from sentient_assist.llm.http_sessions import SessionPerLoop
from sentient_assist.llm.messages import ChatMessage, ModelEvent, ReasoningDelta, TextDelta, ToolCallRequest, ToolSpec
from sentient_assist.llm.model import ModelSettings
from sentient_assist.llm.redaction import masked_excerpt
from sentient_assist.protocol.conventions import TokenUsage
from sentient_assist.protocol.json_value import JSONObject
from sentient_assist.runtime.errors import ModelProviderError, SettingsError
from sentient_assist.runtime.request_context import current_request_id
from sentient_assist.tracing import current_tracing

if TYPE_CHECKING:
    from opentelemetry.trace import Span
    from pydantic import SecretStr

    from sentient_assist.runtime.tracing import Tracing

logger = logging.getLogger("sentient_assist.llm")

_OPENAI_BASE_URL = "https://api.openai.com/v1"
_CONNECT_TIMEOUT = 10.0
_MAX_CONNECTIONS = 1000  # as the openai client's pool
_MAX_LINE = 16 * 1024 * 1024  # one SSE line: a chunk can carry a whole tool call's arguments
_DRAIN_AFTER_DONE = 0.1  # seconds to read the body's end after [DONE], so the connection can be reused
_INITIAL_RETRY_DELAY = 0.5  # the openai client's backoff: 0.5 s x 2**n, at most 8 s, less up to 25 % jitter
_MAX_RETRY_DELAY = 8.0
_MAX_RETRY_AFTER = 120.0  # a provider's Retry-After is honoured up to two minutes; a longer one is not retried
_MAX_SENT_SCANNED = 100_000  # characters of what we sent that a provider's message is masked against
_MAX_PROVIDER_MESSAGE = 300  # characters of the provider's message in the log
_MAX_PROVIDER_FIELD = 80  # of its error's type and code


class ModelEndpointSettings(Protocol):
    """What `OpenAIChatModel.from_settings` reads of the service's Settings."""

    @property
    def model_name(self) -> str | None: ...

    @property
    def model_base_url(self) -> str | None: ...

    @property
    def model_api_key(self) -> SecretStr | None: ...

    @property
    def model_timeout(self) -> float: ...


class OpenAIChatModel:
    """A chat model behind an OpenAI-compatible API. Connection errors, timeouts, 408, 409, 429
    and 5xx are retried before the response starts, with backoff (`max_retries`), as the openai
    client does; a kept connection the server closed unanswered is resent at once on a new one,
    besides. `timeout` is how long to wait for each next piece of the answer.

    A failure raises ModelProviderError with a short message of ours for its kind, the provider's
    HTTP status and the request id in `details`, never the provider's text (it can quote the
    prompt, or part of a key); that text goes to the log, masked (sentient_assist/llm/redaction.py)."""

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 2,
    ) -> None:
        self.name = model
        self._api_key = api_key
        base = base_url or os.environ.get("OPENAI_BASE_URL") or _OPENAI_BASE_URL
        self._url = base.rstrip("/") + "/chat/completions"
        self._headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        if api_key:  # local servers (Ollama, vLLM, LM Studio) need none
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._max_retries = max_retries
        # The openai client's timeouts: `timeout` for each read and for a place in the pool, 10 s to connect.
        self._timeout = aiohttp.ClientTimeout(
            total=None, connect=timeout + _CONNECT_TIMEOUT, sock_connect=_CONNECT_TIMEOUT, sock_read=timeout
        )
        self._proxy, self._proxy_auth = _proxy_from_env(self._url)
        self._sessions = SessionPerLoop(self, _new_session)

    @classmethod
    def from_settings(cls, settings: ModelEndpointSettings) -> OpenAIChatModel:
        """From MODEL_NAME, MODEL_BASE_URL, MODEL_API_KEY and MODEL_TIMEOUT."""
        if not settings.model_name:
            raise SettingsError(
                "MODEL_NAME is not set: this agent needs a language model. Set MODEL_NAME (e.g. "
                "MODEL_NAME=gpt-4o-mini), and MODEL_API_KEY and MODEL_BASE_URL for providers other "
                "than OpenAI, in the environment or in .env (see .env.example)."
            )
        key = settings.model_api_key.get_secret_value() if settings.model_api_key else None
        return cls(settings.model_name, base_url=settings.model_base_url, api_key=key, timeout=settings.model_timeout)

    async def aclose(self) -> None:
        """Close the model's connections now; otherwise they close with their event loop."""
        await self._sessions.aclose()

    def stream(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec], settings: ModelSettings
    ) -> AsyncIterator[ModelEvent]:
        """The reply's events. With the app's tracing on, inside a `chat {model}` span (one per
        call, never per token); off, the stream itself, with nothing around it."""
        tracing = current_tracing()
        if tracing is None:
            return self._stream(messages, tools, settings, self._headers)
        return self._traced(tracing, messages, tools, settings)

    async def _traced(
        self, tracing: Tracing, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec], settings: ModelSettings
    ) -> AsyncIterator[ModelEvent]:
        from sentient_assist.runtime.tracing import end_failed, end_ok, input_messages, output_messages

        url = URL(self._url)
        span = tracing.start_chat(self.name, _provider_of(url.host), url.host, url.port)
        if settings.temperature is not None:
            span.set_attribute("gen_ai.request.temperature", settings.temperature)
        if settings.max_tokens is not None:
            span.set_attribute("gen_ai.request.max_tokens", settings.max_tokens)
        if settings.stop:
            span.set_attribute("gen_ai.request.stop_sequences", list(settings.stop))
        if tracing.capture_content:
            span.set_attribute("gen_ai.input.messages", input_messages([(m.role, m.content or "") for m in messages]))
        # The provider's request carries this span's traceparent: its own spans join the trace.
        reply = _ReplySeen()
        started = time.monotonic()
        first = True
        answer: list[str] | None = [] if tracing.capture_content else None  # the reply's text, when captured
        try:
            async for event in self._stream(messages, tools, settings, tracing.headers_for(span, self._headers), reply):
                if answer is not None and type(event) is TextDelta:
                    answer.append(event.text)
                if first:
                    first = False
                    span.add_event(
                        "gen_ai.first_token", {"gen_ai.response.time_to_first_chunk": time.monotonic() - started}
                    )
                if type(event) is TokenUsage:
                    if event.input_tokens:
                        span.set_attribute("gen_ai.usage.input_tokens", event.input_tokens)
                    if event.output_tokens:
                        span.set_attribute("gen_ai.usage.output_tokens", event.output_tokens)
                yield event
        except asyncio.CancelledError:
            _seen_on(span, reply)
            end_failed(span, "cancelled")
            raise
        except GeneratorExit:
            _seen_on(span, reply)
            end_failed(span, "closed", "the reader stopped before the reply's end")
            raise
        except ModelProviderError as exc:
            _seen_on(span, reply)
            status = exc.details.get("status")  # the provider's HTTP status; never its text
            end_failed(span, str(status) if status else type(exc).__qualname__, type(exc).__name__)
            raise
        except BaseException as exc:
            _seen_on(span, reply)
            end_failed(span, type(exc).__qualname__)
            raise
        else:
            _seen_on(span, reply)
            if answer is not None:
                span.set_attribute("gen_ai.output.messages", output_messages("".join(answer)))
            end_ok(span)

    async def _stream(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec],
        settings: ModelSettings,
        headers: Mapping[str, str],
        seen: _ReplySeen | None = None,
    ) -> AsyncIterator[ModelEvent]:
        try:
            # The request's JSON is made by a function of its own: as a local of this generator the
            # dict, a second copy of the conversation's structure, would live as long as the stream.
            reader = _ReplyReader(await self._open(self._request_body(messages, tools, settings), headers))
            if seen is not None:
                seen.reader = reader
            try:
                while not reader.done:
                    for event in await reader.read():
                        yield event
            finally:
                reader.release()
            if not reader.finish_reasons:
                # No finish_reason: the server stopped mid-answer (llama.cpp's server ends an
                # interrupted stream with `[DONE]` alone), so what came is not the whole answer.
                raise _ProviderFailed.cut_off(reader.streamed, reader.request_id)
        except _ProviderFailed as failed:
            # Masking reads what we sent, which can be long: off the event loop.
            fields = await asyncio.to_thread(self._failure_fields, failed, _sent_texts(messages))
            logger.warning("model provider failed: %s", failed.failure.message, extra={"fields": fields})
            raise failed.failure.error() from None
        # Tool calls come whole, once their last argument piece is in.
        for call in reader.tool_calls():
            yield call

    def _request_body(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec], settings: ModelSettings
    ) -> bytes:
        request: JSONObject = {
            "model": self.name,
            "messages": [_to_openai(message) for message in messages],
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if tools:
            request["tools"] = [
                {
                    "type": "function",
                    "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
                }
                for t in tools
            ]
        if settings.temperature is not None:
            request["temperature"] = settings.temperature
        if settings.max_tokens is not None:
            request["max_tokens"] = settings.max_tokens
        if settings.stop:
            request["stop"] = list(settings.stop)
        return orjson.dumps(request)

    async def _open(self, body: bytes, headers: Mapping[str, str]) -> aiohttp.ClientResponse:
        """The streamed response, its status 2xx: connection errors, timeouts and retryable statuses
        retried as the openai client does, with its delays."""
        session = await self._sessions.session()
        reconnected = False
        attempt = 0
        while True:
            retry = attempt < self._max_retries
            try:
                response = await session.post(
                    self._url,
                    data=body,
                    headers=headers,
                    timeout=self._timeout,
                    allow_redirects=False,
                    proxy=self._proxy,
                    proxy_auth=self._proxy_auth,
                )
            except aiohttp.ClientError as exc:
                if not reconnected and _closed_unanswered(exc):
                    reconnected = True  # once, at once, on a new connection: not one of the backoff's retries
                    continue
                if retry:
                    await asyncio.sleep(_retry_delay(attempt, None))
                    attempt += 1
                    continue
                raise _ProviderFailed.of_transport(exc, None) from None
            if 200 <= response.status < 300:
                return response
            try:
                text = await response.text(errors="replace")
            except aiohttp.ClientError as exc:
                raise _ProviderFailed.of_transport(exc, response) from None
            finally:
                response.release()
            if retry and _should_retry(response.status, response.headers):
                await asyncio.sleep(_retry_delay(attempt, response.headers))
                attempt += 1
                continue
            raise _ProviderFailed.of_status(response, text)

    def _failure_fields(self, failed: _ProviderFailed, sent: list[str]) -> dict[str, object]:
        """The log line's fields, what an operator needs: never the request, and the provider's own
        words with anything like a key, and anything we sent it, masked."""
        failure, said = failed.failure, failed.said
        fields: dict[str, object] = {
            "request_id": current_request_id(),
            "model": self.name,
            "kind": failure.kind,
            "status": failure.status,
            "provider_type": self._masked(said.type, sent, _MAX_PROVIDER_FIELD) if said.type else None,
            "provider_code": self._masked(said.code, sent, _MAX_PROVIDER_FIELD) if said.code else None,
            "provider_request_id": said.request_id,
            "provider_message": self._masked(said.message, sent),
        }
        if said.cause is not None:  # a connection's failure: what the transport said
            fields["cause"] = self._masked(f"{type(said.cause).__name__}: {said.cause}", sent)
        return {key: value for key, value in fields.items() if value is not None}

    def _masked(self, text: str, sent: list[str], limit: int = _MAX_PROVIDER_MESSAGE) -> str:
        known = [self._api_key] if self._api_key else []
        return masked_excerpt(text, known=known, sent=sent, limit=limit)


def _new_session() -> aiohttp.ClientSession:
    connector = aiohttp.TCPConnector(limit=_MAX_CONNECTIONS, limit_per_host=0)
    return aiohttp.ClientSession(connector=connector)


def _proxy_from_env(url: str) -> tuple[str | None, aiohttp.BasicAuth | None]:
    """The proxy HTTP(S)_PROXY and NO_PROXY give for `url` (none: direct), as the openai client
    (httpx) honours them. Read once: the session's `trust_env` would read the environment and
    ~/.netrc again in two worker threads per request (a fifth of a relay's CPU, bench/README.md)."""
    try:
        proxy, auth = get_env_proxy_for_url(URL(url))
    except LookupError:
        return None, None
    return str(proxy), auth


class _ReplyReader:
    """One streamed reply, read as it arrives: the JSON chunks of its SSE `data:` events become
    model events (text, reasoning, usage), and tool-call parts are put together by index.

    Each `read()` takes whatever has arrived (`readany`: usually one token) and splits it into
    lines here, at half the CPU of two `readline` calls per event; and nothing of a chunk is
    held while the reply waits for the next one, which is most of an LLM stream's life."""

    __slots__ = ("_response", "_rest", "_data", "_calls", "_failed", "done", "finish_reasons", "model", "streamed")

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self._response = response
        self._rest = b""  # the start of a line whose end has not come yet
        self._data: list[bytes] = []  # the data lines of the event being read
        self._calls: dict[int, dict[str, str]] = {}
        self._failed: _ProviderFailed | None = None  # after events that came before it in the same read
        self.done = False
        # A reply without one was cut off. Servers send it alone (OpenAI, llama.cpp) or with the
        # last delta (Ollama, vLLM): read from every chunk that has one.
        self.finish_reasons: list[str] = []
        self.model: str | None = None  # read from the usage chunk: never per token
        self.streamed = False  # whether any text, reasoning or tool call came

    async def read(self) -> list[ModelEvent]:
        """The events of what arrived next (none, when no event is whole yet). At `[DONE]` or
        the body's end `done` turns true. An error object in the stream, an event that is not
        JSON, a line too long and a transport's failure raise _ProviderFailed, after the events
        that came before them."""
        if self._failed is not None:
            raise self._failed
        response = self._response
        try:
            block = await response.content.readany()
        except aiohttp.ClientError as exc:
            raise _ProviderFailed.of_transport(exc, response) from None
        events: list[ModelEvent] = []
        try:
            self._split(self._rest + block if self._rest else block, events, ended=not block)
        except _ProviderFailed as failed:
            if not events:
                raise
            self._failed = failed  # the text before the failure reaches the client first
            return events
        if self.done and block:  # [DONE]: the rest of the body, so the connection can be reused
            await _drain(response)
        return events

    def _split(self, block: bytes, events: list[ModelEvent], *, ended: bool) -> None:
        """Add the events whose end is in `block`, and keep the start of a line it ends in; at
        the body's end (`ended`), an event still open is whole."""
        data = self._data
        start = 0
        while (end := block.find(b"\n", start)) >= 0:
            line = block[start:end]
            start = end + 1
            if line.startswith(b"data:"):
                data.append(line[5:].strip())
            elif data and not line.strip():  # a blank line: the event is whole
                if self._event_ends(events):
                    return
            # else: a comment (": keep-alive"), another field (event:, id:), a blank line between events
        self._rest = rest = block[start:]
        if len(rest) > _MAX_LINE:
            raise _ProviderFailed.of_stream(None, self._response, f"a line of more than {_MAX_LINE} bytes")
        if ended:
            self.done = True
            if rest.startswith(b"data:"):
                data.append(rest[5:].strip())
            if data:
                self._event_ends(events)

    def _event_ends(self, events: list[ModelEvent]) -> bool:
        """Add the events of the event whose data lines are read; True at `[DONE]`."""
        data = self._data
        payload = data[0] if len(data) == 1 else b"\n".join(data)
        data.clear()
        if payload.startswith(b"[DONE]"):
            self.done = True
            return True
        try:
            chunk = orjson.loads(payload)
        except orjson.JSONDecodeError:
            raise _ProviderFailed.of_stream(None, self._response, "an event that is not JSON") from None
        if type(chunk) is dict:
            if chunk.get("error"):
                raise _ProviderFailed.of_stream(chunk["error"], self._response)
            self._add(chunk, events)
        return False

    def _add(self, chunk: dict[str, Any], events: list[ModelEvent]) -> None:
        usage = chunk.get("usage")
        if usage:
            self.model = chunk.get("model")
            events.append(
                TokenUsage(
                    input_tokens=usage.get("prompt_tokens") or 0,
                    output_tokens=usage.get("completion_tokens") or 0,
                    total_tokens=usage.get("total_tokens") or 0,
                )
            )
        for choice in chunk.get("choices") or ():
            reason = choice.get("finish_reason")
            if reason and isinstance(reason, str):
                self.finish_reasons.append(reason)
            delta = choice.get("delta")
            if not delta:
                continue
            reasoning = delta.get("reasoning_content") or delta.get("reasoning")
            if reasoning and isinstance(reasoning, str):
                events.append(ReasoningDelta(reasoning))
                self.streamed = True
            content = delta.get("content")
            if content and isinstance(content, str):
                events.append(TextDelta(content))
                self.streamed = True
            parts = delta.get("tool_calls")
            if parts:
                _add_call_parts(self._calls, parts)
                self.streamed = True

    def tool_calls(self) -> list[ToolCallRequest]:
        """The reply's tool calls, whole, in index order: known once the reply has ended."""
        return [
            ToolCallRequest(id=call["id"] or f"call_{index}", name=call["name"], arguments=call["arguments"] or "{}")
            for index, call in sorted(self._calls.items())
        ]

    @property
    def request_id(self) -> str | None:
        """The provider's x-request-id."""
        return self._response.headers.get("x-request-id")

    def release(self) -> None:
        self._response.release()


class _ReplySeen:
    """What a traced call's span reads of its reply once it has ended: the reader, kept by the stream."""

    __slots__ = ("reader",)

    def __init__(self) -> None:
        self.reader: _ReplyReader | None = None


def _seen_on(span: Span, seen: _ReplySeen) -> None:
    reader = seen.reader
    if reader is None:
        return
    if reader.model:
        span.set_attribute("gen_ai.response.model", reader.model)
    reasons = reader.finish_reasons or (["tool_calls"] if reader._calls else [])
    if reasons:
        span.set_attribute("gen_ai.response.finish_reasons", reasons)


def _provider_of(host: str | None) -> str:
    """gen_ai.provider.name for a host: the conventions' names for those known, else "openai"
    (the API it speaks)."""
    host = (host or "").lower()
    for suffix, name in _PROVIDERS:
        if host == suffix or host.endswith("." + suffix):
            return name
    return "openai"


_PROVIDERS = (
    ("openai.com", "openai"),
    ("azure.com", "azure.ai.openai"),
    ("groq.com", "groq"),
    ("x.ai", "x_ai"),
    ("deepseek.com", "deepseek"),
    ("mistral.ai", "mistral_ai"),
    ("perplexity.ai", "perplexity"),
)


async def _drain(response: aiohttp.ClientResponse) -> None:
    """Read the end of the body, briefly: a connection whose body was read whole goes back to the pool."""
    try:
        async with asyncio.timeout(_DRAIN_AFTER_DONE):
            await response.content.read()
    except (TimeoutError, aiohttp.ClientError):
        pass


def _add_call_parts(calls: dict[int, dict[str, str]], parts: Any) -> None:
    """Tool-call deltas, reassembled by index: the id and name come once, the arguments in pieces."""
    for part in parts:
        index = part.get("index")
        if not isinstance(index, int):  # some servers send whole calls without one: a new id is a new call
            index = len(calls) if part.get("id") or not calls else max(calls)
        call = calls.setdefault(index, {"id": "", "name": "", "arguments": ""})
        call["id"] = part.get("id") or call["id"]
        function = part.get("function")
        if function:
            call["name"] = function.get("name") or call["name"]
            call["arguments"] += function.get("arguments") or ""


@dataclass(frozen=True)
class _Failure:
    """One provider failure as the client is told of it: our message, never the provider's."""

    # For the log: credentials, rate_limit, timeout, connection, refused, provider_error, stream_error, cut_off.
    kind: str
    message: str
    error_code: int
    status: int | None = None  # the provider's HTTP status, when it answered with one
    retry_hints: dict[str, str | bool] = field(default_factory=dict)  # and whether a retry is safe

    def error(self) -> ModelProviderError:
        """The error the client gets: our message; the status, our request id and retry hints in `details`."""
        details: dict[str, object] = {}
        if self.status is not None:
            details["status"] = self.status
        request_id = current_request_id()
        if request_id is not None:
            details["request_id"] = request_id
        return ModelProviderError(self.message, self.error_code, {**details, **self.retry_hints})


@dataclass(frozen=True)
class _ProviderSaid:
    """What the provider (or the transport) said of a failure: for the log, masked, never the client."""

    message: str
    type: str | None = None
    code: str | None = None
    request_id: str | None = None  # the provider's x-request-id
    cause: BaseException | None = None  # the transport's own error

    @classmethod
    def of_error_object(cls, error: object, fallback: str, request_id: str | None) -> _ProviderSaid:
        """An OpenAI error object (`{"message", "type", "code"}`), or whatever body stood in for one."""
        if isinstance(error, dict):
            message = error.get("message")
            code = error.get("code")
            type_ = error.get("type")
            return cls(
                message if isinstance(message, str) and message else fallback,
                str(type_) if type_ else None,
                str(code) if code is not None else None,
                request_id,
            )
        if isinstance(error, str) and error:  # a body that is not JSON: a proxy's page
            return cls(error, request_id=request_id)
        return cls(fallback, request_id=request_id)


class _ProviderFailed(Exception):
    """Raised inside `stream()`: the failure the client is told of, and what the provider said."""

    def __init__(self, failure: _Failure, said: _ProviderSaid) -> None:
        super().__init__(failure.message)
        self.failure = failure
        self.said = said

    @classmethod
    def of_status(cls, response: aiohttp.ClientResponse, text: str) -> _ProviderFailed:
        stripped = text.strip()
        body: object = stripped
        try:
            body = orjson.loads(stripped)
        except orjson.JSONDecodeError:
            pass
        error = body.get("error", body) if isinstance(body, dict) else body
        said = _ProviderSaid.of_error_object(
            error, f"Error code: {response.status}", response.headers.get("x-request-id")
        )
        return cls(_failure_of(status=response.status, headers=response.headers), said)

    @classmethod
    def of_transport(cls, exc: BaseException, response: aiohttp.ClientResponse | None) -> _ProviderFailed:
        timed_out = isinstance(exc, TimeoutError)
        said = _ProviderSaid(
            "Request timed out." if timed_out else "Connection error.",
            request_id=response.headers.get("x-request-id") if response is not None else None,
            cause=exc,
        )
        return cls(_failure_of(transport=exc), said)

    @classmethod
    def of_stream(cls, error: object, response: aiohttp.ClientResponse, message: str | None = None) -> _ProviderFailed:
        """An error object in the middle of the stream, or a line that cannot be read."""
        request_id = response.headers.get("x-request-id")
        if message is not None:
            said = _ProviderSaid(f"unreadable stream: {message}", request_id=request_id)
        else:
            said = _ProviderSaid.of_error_object(error, "An error occurred during streaming", request_id)
        return cls(_failure_of(), said)

    @classmethod
    def cut_off(cls, streamed: bool, request_id: str | None) -> _ProviderFailed:
        """A stream that ended without a finish_reason. Retryable when nothing of the answer came:
        the client shows nothing it would have to take back."""
        said = _ProviderSaid("the stream ended without a finish_reason", request_id=request_id)
        if streamed:
            message = "The model provider stopped before the end of the answer: what came is cut off."
        else:
            message = "The model provider ended the answer before it began; retry."
        return cls(_Failure("cut_off", message, 502, retry_hints={"retryable": not streamed}), said)


def _failure_of(
    *, status: int | None = None, headers: Mapping[str, str] | None = None, transport: BaseException | None = None
) -> _Failure:
    """What the client is told of a provider failure, by its kind: a transport's error, an HTTP
    status, or (neither) an error in the middle of the stream."""
    if transport is not None:
        if isinstance(transport, TimeoutError):
            return _Failure("timeout", "The model provider did not answer in time.", 504)
        return _Failure("connection", "The connection to the model provider failed.", 502)
    if status in (401, 403):
        return _Failure("credentials", "The model provider rejected the credentials.", 502, status)
    if status == 429:
        hints: dict[str, str | bool] = dict(_retry_hints(headers or {}))
        return _Failure("rate_limit", "The model provider is rate limiting; retry later.", 429, status, hints)
    if status is not None and status < 500:
        return _Failure("refused", f"The model provider refused the request (HTTP {status}).", 502, status)
    if status is not None:
        return _Failure("provider_error", f"The model provider failed (HTTP {status}).", 502, status)
    # An error event in the middle of the stream: the HTTP status was 200.
    return _Failure("stream_error", "The model provider failed while answering.", 502)


def _retry_hints(headers: Mapping[str, str]) -> Iterator[tuple[str, str]]:
    """The provider's retry-after and retry-after-ms headers, passed on as they are."""
    for header in ("retry-after", "retry-after-ms"):
        value = headers.get(header)
        if value is not None:
            yield header.replace("-", "_"), value


def _should_retry(status: int, headers: Mapping[str, str]) -> bool:
    """As the openai client: never past a Retry-After of two minutes; `x-should-retry` if the
    provider says; else 408, 409, 429 and 5xx."""
    retry_after = _retry_after(headers)
    if retry_after is not None and math.isfinite(retry_after) and retry_after > _MAX_RETRY_AFTER:
        return False
    said = headers.get("x-should-retry")
    if said in ("true", "false"):
        return said == "true"
    return status in (408, 409, 429) or status >= 500


def _closed_unanswered(exc: aiohttp.ClientError) -> bool:
    """Closed before a byte of answer on a connection that was open: most often a pooled one the
    model server closed as it went idle, just as it was taken (uvicorn's keep-alive is 5 s, so
    llama.cpp's and vLLM's Python servers do it between a user's messages). aiohttp retries that
    only for idempotent methods, and a chat completion is a POST. A failed connect is not this."""
    closed = isinstance(exc, aiohttp.ServerDisconnectedError | aiohttp.ClientOSError)
    return closed and not isinstance(exc, aiohttp.ClientConnectorError)


def _retry_delay(attempt: int, headers: Mapping[str, str] | None) -> float:
    """The provider's Retry-After when it is over 0 and up to two minutes, else the backoff."""
    retry_after = _retry_after(headers) if headers is not None else None
    if retry_after is not None and math.isfinite(retry_after) and 0 < retry_after <= _MAX_RETRY_AFTER:
        return retry_after
    return min(_INITIAL_RETRY_DELAY * 2.0**attempt, _MAX_RETRY_DELAY) * (1 - 0.25 * random.random())


def _retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds from retry-after-ms, else retry-after (seconds, or an HTTP date)."""
    for header, divisor in (("retry-after-ms", 1000), ("retry-after", 1)):
        value = headers.get(header)
        if value is None:
            continue
        try:
            return float(value) / divisor
        except ValueError:
            continue
    date = headers.get("retry-after")
    parsed = email.utils.parsedate_tz(date) if date else None
    return float(email.utils.mktime_tz(parsed) - time.time()) if parsed else None


def _sent_texts(messages: Sequence[ChatMessage]) -> list[str]:
    """What we sent the model that a provider could quote back (contents and tool arguments), the
    latest first, up to _MAX_SENT_SCANNED characters: a provider quotes the prompt and the turns
    near it, and masking reads every character of what it is given."""
    texts: list[str] = []
    budget = _MAX_SENT_SCANNED
    for message in reversed(messages):
        for text in (message.content, *(call.arguments for call in message.tool_calls)):
            if text and budget > 0:
                texts.append(text[-budget:])
                budget -= len(text)
    return texts


def _to_openai(message: ChatMessage) -> JSONObject:
    if message.role == "tool":
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
    entry: JSONObject = {"role": message.role, "content": message.content}
    if message.tool_calls:
        entry["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in message.tool_calls
        ]
        if not message.content:
            entry["content"] = None
    return entry
