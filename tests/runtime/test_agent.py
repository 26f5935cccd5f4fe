"""AbstractAgent: its name, which is every event's `source`."""

from __future__ import annotations

import pytest

from sentient_assist import AbstractAgent, Agent
from sentient_assist.exceptions import AgentError


class Named(AbstractAgent):
    async def assist(self, session, query, response_handler) -> None:
        await response_handler.respond("FINAL_RESPONSE", "hello")


def test_an_agent_is_named_by_its_argument_its_class_attribute_or_its_class():
    assert Named("given").name == "given"
    assert Named().name == "Named"

    class WithAttribute(Named):
        name = "attribute"

    assert WithAttribute().name == "attribute"


async def test_a_name_up_to_the_wire_limit_runs_and_is_every_events_source():
    agent = Named("n" * 256)
    result = await Agent(agent).run("hi")
    assert result.text == "hello" and not result.errors
    again = await Agent(agent).run("and again", history=result.messages)  # its events come back as history
    assert again.text == "hello" and not again.errors


def test_a_longer_name_is_refused_when_the_agent_is_made():
    with pytest.raises(AgentError, match="at most 256 characters"):
        Named("n" * 257)
