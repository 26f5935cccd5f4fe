"""One result for one run: `stream(...).result()` (and its `done` event's result) is what `run(...)`
returns, typed output and all, in-process and over HTTP."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from pydantic import BaseModel

from sentient_assist import Agent, AgentResult, LLMAgent
from sentient_assist.llm import ChatMessage, ToolSpec
from sentient_assist.testing import FunctionModel, ScriptedCall, ScriptedReply
from tests.support.server import running_server


class Weather(BaseModel):
    city: str
    celsius: int


def _final_result(messages: Sequence[ChatMessage], tools: Sequence[ToolSpec]) -> ScriptedReply:
    return ScriptedReply(tool_calls=(ScriptedCall("final_result", {"city": "Oslo", "celsius": 21}),))


def weather_agent() -> LLMAgent:
    """An LLMAgent with an output type, on a stand-in model: served by this module's server too."""
    return LLMAgent(name="weather", model=FunctionModel(_final_result), output_type=Weather)


@pytest.fixture(scope="module")
def served_weather():
    with running_server({"ASSIST_AGENT": f"{__name__}:weather_agent", "ASSIST_LOG_LEVEL": "warning"}) as server:
        yield server


async def streamed(agent: Agent, **options: Any) -> tuple[AgentResult[Any], AgentResult[Any]]:
    """The `done` event's result and `result()`, of one stream read to its end."""
    async with agent.stream("Weather in Oslo?", **options) as events:
        done = [event async for event in events][-1]
    assert done.kind == "done" and done.result is not None
    return done.result, events.result()


def assert_one_result(ran: AgentResult[Any], *results: AgentResult[Any]) -> None:
    for result in results:
        assert type(result) is type(ran)  # AgentResult[Weather], not AgentResult[Any]
        assert type(result.output) is type(ran.output)
        assert (result.output, result.errors, result.text) == (ran.output, ran.errors, ran.text)


async def test_in_process_a_stream_of_an_llm_agent_gives_its_output_type_as_run_does():
    agent = Agent(weather_agent())
    ran = await agent.run("Weather in Oslo?")
    assert isinstance(ran.output, Weather) and not ran.errors
    assert_one_result(ran, *await streamed(agent))


async def test_in_process_an_output_type_given_to_the_call_wins_in_a_stream_too():
    agent = Agent(weather_agent())
    ran = await agent.run("Weather in Oslo?", output_type=dict)
    assert ran.output == {"city": "Oslo", "celsius": 21}
    assert_one_result(ran, *await streamed(agent, output_type=dict))


async def test_over_http_a_stream_with_an_output_type_gives_what_run_gives(served_weather):
    agent = Agent(served_weather.url + "/assist")
    untyped = await agent.run("Weather in Oslo?")
    assert untyped.output == {"city": "Oslo", "celsius": 21}  # no output type known: the JSON as it came
    assert_one_result(untyped, *await streamed(agent))

    ran = await agent.run("Weather in Oslo?", output_type=Weather)
    assert ran.output == Weather(city="Oslo", celsius=21)
    assert_one_result(ran, *await streamed(agent, output_type=Weather))

    agent.output_type = Weather  # known for every run of this handle
    assert_one_result(ran, await agent.run("Weather in Oslo?"), *await streamed(agent))


async def test_over_http_an_output_that_is_not_the_type_is_the_same_error_either_way(served_weather):
    agent = Agent(served_weather.url + "/assist")
    ran = await agent.run("Weather in Oslo?", output_type=list[int])
    assert ran.output is None and "not a list" in ran.errors[-1].message
    assert_one_result(ran, *await streamed(agent, output_type=list[int]))
