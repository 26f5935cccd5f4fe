"""An agent for tests/server/test_hostile_clients.py, served by a real server: one that writes more
than the kernel's socket buffers hold, so that a client that does not read leaves the server
holding what it has not sent."""

from __future__ import annotations

from sentient_assist import AbstractAgent, Query, ResponseHandler, Session


class Flood(AbstractAgent):
    """Streams chunks of the prompt's size in characters (say `1000000`) until it is stopped."""

    name = "flood"
    description = "Test agent: an answer without end, in chunks of the prompt's size."

    async def assist(self, session: Session, query: Query, response_handler: ResponseHandler) -> None:
        chunk = "x" * int(query.prompt)
        stream = response_handler.create_text_stream("FINAL_RESPONSE")
        while True:  # as fast as the client takes it: the stream's backpressure holds the agent
            await stream.emit_chunk(chunk)
