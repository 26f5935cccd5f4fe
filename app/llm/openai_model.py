"""OpenAIChatModel: any OpenAI-compatible chat-completions endpoint, streamed.

One class for OpenAI, Fireworks, Together, Groq, OpenRouter, vLLM, LM Studio and
Ollama: they differ only in `base_url`, key and model name.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import openai
from openai import AsyncOpenAI

from app.llm.messages import ChatMessage, ModelEvent, ReasoningDelta, TextDelta, ToolCallRequest, ToolSpec
from app.llm.model import ModelSettings
from app.llm.redaction import masked_excerpt
from app.protocol.conventions import TokenUsage
from app.runtime.errors import ModelProviderError, SettingsError
from app.runtime.request_context import current_request_id

logger = logging.getLogger("app.llm")

# Local servers (Ollama, vLLM, LM Studio) take any key; the client insists on one.
_NO_KEY = "not-needed"
_REASONING_FIELDS = ("reasoning_content", "reasoning")
_MAX_SENT_SCANNED = 100_000  # characters of what we sent that a provider's message is masked against
_MAX_PROVIDER_MESSAGE = 300  # characters of the provider's message in the log
_MAX_PROVIDER_FIELD = 80  # of its error's type and code


class OpenAIChatModel:
    """A chat model behind an OpenAI-compatible API. The openai client retries connection
    errors, 429s and 5xx before the first token, with backoff (`max_retries`).

    A failure raises ModelProviderError with a short message of ours for its kind, the provider's
    HTTP status and the request id in `details`, never the provider's text (it can quote the
    prompt, or part of a key); that text goes to the log, masked (app/llm/redaction.py)."""

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 2,
        client: AsyncOpenAI | None = None,
    ) -> None:
        self.name = model
        self._api_key = api_key
        self._client = client or AsyncOpenAI(
            base_url=base_url,
            api_key=api_key or _NO_KEY,
            timeout=openai.Timeout(timeout, connect=10.0),
            max_retries=max_retries,
        )

    @classmethod
    def from_settings(cls, settings: Any) -> OpenAIChatModel:
        """From MODEL_NAME, MODEL_BASE_URL, MODEL_API_KEY and MODEL_TIMEOUT."""
        if not settings.model_name:
            raise SettingsError(
                "MODEL_NAME is not set: this agent needs a language model. Set MODEL_NAME (e.g. "
                "MODEL_NAME=gpt-4o-mini), and MODEL_API_KEY and MODEL_BASE_URL for providers other "
                "than OpenAI, in the environment or in .env (see .env.example)."
            )
        key = settings.model_api_key.get_secret_value() if settings.model_api_key else None
        return cls(settings.model_name, base_url=settings.model_base_url, api_key=key, timeout=settings.model_timeout)

    async def stream(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec], settings: ModelSettings
    ) -> AsyncIterator[ModelEvent]:
        request: dict[str, Any] = {
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
        calls: dict[int, dict[str, str]] = {}
        try:
            chunks = await self._client.chat.completions.create(**request)
            async for chunk in chunks:
                if chunk.usage is not None:
                    usage = chunk.usage
                    yield TokenUsage(
                        input_tokens=usage.prompt_tokens or 0,
                        output_tokens=usage.completion_tokens or 0,
                        total_tokens=usage.total_tokens or 0,
                    )
                for choice in chunk.choices:
                    delta = choice.delta
                    reasoning = _reasoning_of(delta)
                    if reasoning:
                        yield ReasoningDelta(reasoning)
                    if delta.content:
                        yield TextDelta(delta.content)
                    for part in delta.tool_calls or ():
                        call = calls.setdefault(part.index, {"id": "", "name": "", "arguments": ""})
                        call["id"] = part.id or call["id"]
                        if part.function is not None:
                            call["name"] = part.function.name or call["name"]
                            call["arguments"] += part.function.arguments or ""
        except openai.APIError as exc:
            failure = _failure_of(exc)
            # Masking reads what we sent, which can be long: off the event loop.
            fields = await asyncio.to_thread(self._failure_fields, failure, exc, _sent_texts(messages))
            logger.warning("model provider failed: %s", failure.message, extra={"fields": fields})
            raise failure.error() from None
        # Tool calls come whole, once their last argument piece is in.
        for index in sorted(calls):
            call = calls[index]
            yield ToolCallRequest(
                id=call["id"] or f"call_{index}", name=call["name"], arguments=call["arguments"] or "{}"
            )

    def _failure_fields(self, failure: _Failure, exc: openai.APIError, sent: list[str]) -> dict[str, Any]:
        """The log line's fields, what an operator needs: never the request, and the provider's own
        words with anything like a key, and anything we sent it, masked."""
        fields: dict[str, Any] = {
            "request_id": current_request_id(),
            "model": self.name,
            "kind": failure.kind,
            "status": failure.status,
            "provider_type": self._masked(exc.type, sent, _MAX_PROVIDER_FIELD) if exc.type else None,
            "provider_code": self._masked(exc.code, sent, _MAX_PROVIDER_FIELD) if exc.code else None,
            "provider_request_id": getattr(exc, "request_id", None),
            "provider_message": self._masked(_provider_message(exc), sent),
        }
        if exc.__cause__ is not None:  # a connection's failure: what the transport said
            fields["cause"] = self._masked(f"{type(exc.__cause__).__name__}: {exc.__cause__}", sent)
        return {key: value for key, value in fields.items() if value is not None}

    def _masked(self, text: str, sent: list[str], limit: int = _MAX_PROVIDER_MESSAGE) -> str:
        known = [self._api_key] if self._api_key else []
        return masked_excerpt(text, known=known, sent=sent, limit=limit)


@dataclass(frozen=True)
class _Failure:
    """One provider failure as the client is told of it: our message, never the provider's."""

    kind: str  # for the log: credentials, rate_limit, timeout, connection, refused, provider_error, stream_error
    message: str
    error_code: int
    status: int | None = None  # the provider's HTTP status, when it answered with one
    retry_hints: dict[str, str] = field(default_factory=dict)

    def error(self) -> ModelProviderError:
        """The error the client gets: our message; the status, our request id and retry hints in `details`."""
        details: dict[str, Any] = {}
        if self.status is not None:
            details["status"] = self.status
        request_id = current_request_id()
        if request_id is not None:
            details["request_id"] = request_id
        return ModelProviderError(self.message, self.error_code, {**details, **self.retry_hints})


def _failure_of(exc: openai.APIError) -> _Failure:
    """What the client is told of a provider failure, by its kind."""
    status = exc.status_code if isinstance(exc, openai.APIStatusError) else None
    if isinstance(exc, (openai.AuthenticationError, openai.PermissionDeniedError)):
        return _Failure("credentials", "The model provider rejected the credentials.", 502, status)
    if isinstance(exc, openai.RateLimitError):
        return _Failure(
            "rate_limit", "The model provider is rate limiting; retry later.", 429, status, dict(_retry_hints(exc))
        )
    if isinstance(exc, openai.APITimeoutError):
        return _Failure("timeout", "The model provider did not answer in time.", 504)
    if isinstance(exc, openai.APIConnectionError):
        return _Failure("connection", "The connection to the model provider failed.", 502)
    if status is not None and status < 500:
        return _Failure("refused", f"The model provider refused the request (HTTP {status}).", 502, status)
    if status is not None:
        return _Failure("provider_error", f"The model provider failed (HTTP {status}).", 502, status)
    # An error event in the middle of the stream: the HTTP status was 200.
    return _Failure("stream_error", "The model provider failed while answering.", 502)


def _retry_hints(exc: openai.RateLimitError) -> Iterator[tuple[str, str]]:
    """The provider's retry-after and retry-after-ms headers, passed on as they are."""
    for header in ("retry-after", "retry-after-ms"):
        value = exc.response.headers.get(header)
        if value is not None:
            yield header.replace("-", "_"), value


def _provider_message(exc: openai.APIError) -> str:
    """The provider's own message: its error object's `message`, or a body that is not JSON (a
    proxy's page), else the client's summary."""
    body = exc.body
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        return str(body["message"])
    if isinstance(body, str) and body:
        return body
    return exc.message


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


def _reasoning_of(delta: Any) -> str | None:
    extra = delta.model_extra or {}
    for name in _REASONING_FIELDS:
        value = extra.get(name)
        if isinstance(value, str) and value:
            return value
    return None


def _to_openai(message: ChatMessage) -> dict[str, Any]:
    if message.role == "tool":
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
    entry: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.tool_calls:
        entry["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in message.tool_calls
        ]
        if not message.content:
            entry["content"] = None
    return entry
