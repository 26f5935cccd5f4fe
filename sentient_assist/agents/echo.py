"""Sends the prompt back as its answer, as one streamed chunk of FINAL_RESPONSE: the smallest agent, for checking a
deployment end to end (what went in is what comes out). No key, no network."""

from sentient_assist import AbstractAgent, Query, ResponseHandler, Session


class EchoAgent(AbstractAgent):
    name = "echo"
    description = "Answers with the prompt, unchanged. No key, no network."

    async def assist(self, session: Session, query: Query, response_handler: ResponseHandler) -> None:
        stream = response_handler.create_text_stream("FINAL_RESPONSE")
        await stream.emit_chunk(query.prompt)
        await stream.complete()
        await response_handler.complete()
