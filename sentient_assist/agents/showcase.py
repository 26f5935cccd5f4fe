"""The default agent: every event type, no key, no network.

Any prompt: a PLAN text block, a SOURCES document, then the answer streamed
word by word as FINAL_RESPONSE. The prompt `error` shows an error event; the
prompt `slow` streams a long answer slowly (for watching pings and disconnects).
"""

import asyncio

from sentient_assist import AbstractAgent, Query, ResponseHandler, Session

WORD_PAUSE = 0.03
SLOW_WORD_PAUSE = 0.5
SLOW_WORDS = 120


class ShowcaseAgent(AbstractAgent):
    name = "showcase"
    description = "Shows every event type: a plan, sources, a streamed answer. No key, no network."

    async def assist(self, session: Session, query: Query, response_handler: ResponseHandler) -> None:
        prompt = query.prompt.strip()
        command = prompt.lower()
        turns = len(session.get_interactions())

        await response_handler.emit_text_block(
            "PLAN", "1. Read the question. 2. Gather sources. 3. Stream the answer word by word."
        )
        await response_handler.emit_json(
            "SOURCES",
            {
                "results": [
                    {
                        "title": "Sentient Chat events",
                        "url": "https://example.com/events",
                        "snippet": "text blocks, documents, streams",
                    },
                    {"title": "Server-sent events", "url": "https://example.com/sse", "snippet": "one frame per event"},
                ]
            },
        )

        if command == "error":
            await response_handler.emit_error(
                "This is what an error event looks like; the response goes on after it.",
                error_code=400,
                details={"hint": "any other prompt streams an answer"},
            )
            answer = "After an error event the agent may still answer, and done still comes last."
            pause = WORD_PAUSE
        elif command == "slow":
            answer = " ".join(f"word{n}" for n in range(1, SLOW_WORDS + 1))
            pause = SLOW_WORD_PAUSE
        else:
            answer = (
                f"You asked: {prompt!r}. I am the showcase agent, and this is turn {turns + 1} "
                "of our chat. I sent a plan as a text block and sources as a JSON document; "
                "this answer streams word by word. Try the prompts 'error' and 'slow' too."
            )
            pause = WORD_PAUSE

        stream = response_handler.create_text_stream("FINAL_RESPONSE")
        words = answer.split(" ")
        for index, word in enumerate(words):
            await stream.emit_chunk(word if index == len(words) - 1 else word + " ")
            await asyncio.sleep(pause)
        await stream.complete()
        await response_handler.complete()
