"""Targets for `module:attr` agent specs in tests/test_registry.py (not a test module)."""

from sentient_assist import AbstractAgent


class ClassAgent(AbstractAgent):
    name = "class-agent"

    async def assist(self, session, query, response_handler):
        await response_handler.respond("ANSWER", "from a class")


instance = ClassAgent("instance-agent")


def factory() -> AbstractAgent:
    return ClassAgent("factory-agent")


def failing_factory() -> AbstractAgent:
    raise RuntimeError("no model key configured")


def non_agent_factory() -> dict:
    return {"not": "an agent"}


not_an_agent = "just a string"
