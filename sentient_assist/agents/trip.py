"""Asks the person before it answers: a pause and its resume, no key, no network.

Any prompt: it asks which city (ASK_USER, with choices) and its response ends there. The
answer comes back as the next request, with the question's turn in the history; the agent
finds `session.resumed` and plans the trip for that city. A request whose history carries
a token this service did not issue for that conversation is refused before the agent runs.
"""

from sentient_assist import AbstractAgent, Query, ResponseHandler, Session

CITIES = ["Oslo", "Lima", "Kyoto"]


class TripAgent(AbstractAgent):
    name = "trip"
    description = "Asks which city, then plans a day there: pause and resume. No key, no network."

    async def assist(self, session: Session, query: Query, response_handler: ResponseHandler) -> None:
        resumed = session.resumed
        if resumed is None:
            await response_handler.emit_text_block("PLAN", "1. Ask where. 2. Plan the day there.")
            await response_handler.ask_user("Which city?", choices=CITIES, state={"request": query.prompt})
            return
        city = resumed.answer.strip() or "somewhere"
        answer = response_handler.create_text_stream("FINAL_RESPONSE")
        for word in f"A day in {city}, as you asked ({resumed.state['request']!r}): walk, eat, rest.".split(" "):
            await answer.emit_chunk(word + " ")
        await answer.complete()
        await response_handler.complete()
