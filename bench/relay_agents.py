"""The relay load's 0.3.0-style agent: the 0.3.0 README's pattern, an LLM relayed chunk by chunk.

One AsyncOpenAI client per agent (the README's `ModelProvider`), `chat.completions.create(stream=True)`,
and `emit_chunk` for each delta's content, then `complete()` on the stream and the response.
It runs unchanged in this service (`ASSIST_AGENT=bench.relay_agents:RelayAgent`) and in the 0.3.0
DefaultServer (bench/reference_server.py); `BENCH_FRAMEWORK` picks the API it imports, as
in bench/agent.py. The model is configured as our chat agent's is: MODEL_BASE_URL, MODEL_NAME,
MODEL_API_KEY.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator

from openai import AsyncOpenAI

if os.environ.get("BENCH_FRAMEWORK", "sentient_assist") == "sentient_agent_framework":
    from sentient_agent_framework import AbstractAgent
else:
    from sentient_assist import AbstractAgent

EVENT_NAME = "FINAL_RESPONSE"


class ModelProvider:
    """The README's model provider: one AsyncOpenAI client, a streamed answer's text chunks."""

    def __init__(self, api_key: str, base_url: str | None, model: str) -> None:
        self.model = model
        self.client = AsyncOpenAI(api_key=api_key, base_url=base_url)

    async def query_stream(self, query: str) -> AsyncIterator[str]:
        stream = await self.client.chat.completions.create(
            model=self.model,
            messages=[{"role": "user", "content": query}],
            stream=True,
        )
        async for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                yield chunk.choices[0].delta.content


class RelayAgent(AbstractAgent):
    name = "relay"
    description = "Relays a language model's answer chunk by chunk, the 0.3.0 README way."

    def __init__(self, name: str = "relay") -> None:
        super().__init__(name)
        self._model_provider = ModelProvider(
            api_key=os.environ.get("MODEL_API_KEY", "x"),
            base_url=os.environ.get("MODEL_BASE_URL"),
            model=os.environ.get("MODEL_NAME", "relay"),
        )

    async def assist(self, session, query, response_handler) -> None:
        final_response_stream = response_handler.create_text_stream(EVENT_NAME)
        async for chunk in self._model_provider.query_stream(query.prompt):
            await final_response_stream.emit_chunk(chunk)
        await final_response_stream.complete()
        await response_handler.complete()
