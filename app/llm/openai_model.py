"""OpenAIChatModel: any OpenAI-compatible chat-completions endpoint, streamed.

One class for OpenAI, Fireworks, Together, Groq, OpenRouter, vLLM, LM Studio and
Ollama: they differ only in `base_url`, key and model name.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

import openai
from openai import AsyncOpenAI

from app.llm.messages import ChatMessage, ModelEvent, ReasoningDelta, TextDelta, ToolCallRequest, ToolSpec
from app.llm.model import ModelSettings
from app.protocol.conventions import TokenUsage
from app.runtime.errors import ModelProviderError, SettingsError

# Local servers (Ollama, vLLM, LM Studio) take any key; the client insists on one.
_NO_KEY = "not-needed"
_REASONING_FIELDS = ("reasoning_content", "reasoning")
_MAX_PROVIDER_MESSAGE = 300


class OpenAIChatModel:
    """A chat model behind an OpenAI-compatible API. The openai client retries connection
    errors, 429s and 5xx before the first token, with backoff (`max_retries`)."""

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
            raise self._provider_error(exc) from None
        # Tool calls come whole, once their last argument piece is in.
        for index in sorted(calls):
            call = calls[index]
            yield ToolCallRequest(
                id=call["id"] or f"call_{index}", name=call["name"], arguments=call["arguments"] or "{}"
            )

    def _provider_error(self, exc: openai.APIError) -> ModelProviderError:
        """A failure the user can act on; never the key, never a traceback."""
        if isinstance(exc, (openai.AuthenticationError, openai.PermissionDeniedError)):
            return ModelProviderError("The model provider rejected the credentials (check MODEL_API_KEY).", 502)
        if isinstance(exc, openai.RateLimitError):
            details = {}
            for header in ("retry-after", "retry-after-ms"):  # the provider's hint, passed on as is
                if exc.response.headers.get(header) is not None:
                    details[header.replace("-", "_")] = exc.response.headers[header]
            return ModelProviderError("The model provider is rate limiting requests; retry later.", 429, details)
        if isinstance(exc, openai.APITimeoutError):
            return ModelProviderError("The model provider did not answer in time.", 504)
        if isinstance(exc, openai.APIConnectionError):
            return ModelProviderError("Could not reach the model provider.", 502)
        status = getattr(exc, "status_code", None)
        if isinstance(exc, openai.APIStatusError) and status is not None and 400 <= status < 500:
            return ModelProviderError(
                f"The model provider refused the request: {self._redacted(exc.message)}",
                502,
                {"provider_status": status},
            )
        return ModelProviderError("The model provider failed while answering.", 502)

    def _redacted(self, text: str) -> str:
        if self._api_key:
            text = text.replace(self._api_key, "***")
        return text[:_MAX_PROVIDER_MESSAGE]


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
