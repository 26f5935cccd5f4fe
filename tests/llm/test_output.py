"""Typed output: LLMAgent(output_type=...) asks for a structure, checks it, lets the model try
again with what was wrong, and sends it as OUTPUT; Agent.run(output_type=...) reads it back."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from sentient_assist import Agent, AgentResult, LLMAgent, OpenAIChatModel, UsageLimits, tool
from sentient_assist.testing import ScriptedCall, ScriptedModel, ScriptedReply
from tests.support.agents import ScriptedAgent
from tests.support.openai_server import stream_reply


class Weather(BaseModel):
    city: str
    celsius: int


@tool
def thermometer(city: str) -> int:
    """The temperature in a city."""
    return 21


@pytest.fixture(scope="module")
def both_scripted_output(request):
    scripted_server = request.getfixturevalue("scripted_server")
    return Agent(ScriptedAgent()), Agent(scripted_server.url + "/assist")


def final(arguments: dict) -> ScriptedReply:
    return ScriptedReply(tool_calls=(ScriptedCall("final_result", arguments),))


def run_with(*replies: ScriptedReply, **options) -> tuple[Agent, ScriptedModel]:
    model = ScriptedModel(list(replies))
    return Agent(LLMAgent(model=model, tools=[thermometer], **options)), model


async def test_a_valid_output_is_sent_as_output_and_read_back_typed():
    agent, model = run_with(final({"city": "Oslo", "celsius": 21}), output_type=Weather)
    result = await agent.run("Weather in Oslo?", output_type=Weather)
    assert isinstance(result, AgentResult) and result.output == Weather(city="Oslo", celsius=21)
    ((_, tools, _),) = model.calls
    (offered,) = [spec for spec in tools if spec.name == "final_result"]
    assert offered.parameters["required"] == ["city", "celsius"]
    names = [event["event_name"] for event in result.messages[-1].events]
    assert names == ["OUTPUT", "USAGE", "done"]  # the output tool's call is not a TOOL_CALL of the run


async def test_an_llm_agent_with_an_output_type_gives_its_type_without_being_told_again():
    agent, _ = run_with(final({"city": "Oslo", "celsius": 21}), output_type=Weather)
    assert agent.output_type is Weather
    result = await agent.run("Weather in Oslo?")
    assert result.output == Weather(city="Oslo", celsius=21) and not result.errors
    wrapped, _ = run_with(final({"result": ["Oslo", "Lima"]}), output_type=tuple[str, ...])
    assert (await wrapped.run("Two cities?")).output == ("Oslo", "Lima")  # not the list the JSON has


async def test_an_explicit_output_type_still_wins_over_the_agents():
    agent, _ = run_with(final({"city": "Oslo", "celsius": 21}), output_type=Weather)
    as_dict = await agent.run("Weather in Oslo?", output_type=dict)
    assert as_dict.output == {"city": "Oslo", "celsius": 21}


def test_run_sync_gives_the_agents_output_type_too():
    agent, _ = run_with(final({"city": "Oslo", "celsius": 21}), output_type=Weather)
    assert agent.run_sync("Weather in Oslo?").output == Weather(city="Oslo", celsius=21)


async def test_an_invalid_output_goes_back_to_the_model_with_what_was_wrong_and_the_retry_is_used():
    agent, model = run_with(
        final({"city": "Oslo", "celsius": "warm"}),
        ScriptedReply(text="I will check.", tool_calls=(ScriptedCall("thermometer", {"city": "Oslo"}),)),
        final({"city": "Oslo", "celsius": 21}),
        output_type=Weather,
    )
    result = await agent.run("Weather in Oslo?", output_type=Weather)
    assert result.output == Weather(city="Oslo", celsius=21) and not result.errors
    told = model.calls[1][0][-1]
    assert told.role == "tool" and "celsius" in told.content and "final_result again" in told.content
    assert [c.name for c in result.tool_calls] == ["thermometer"]  # an ordinary tool round in between
    assert result.usage.requests == 3


async def test_an_answer_in_text_alone_is_asked_again_for_the_structure():
    agent, model = run_with(
        ScriptedReply(text="It is 21 degrees in Oslo."), final({"city": "Oslo", "celsius": 21}), output_type=Weather
    )
    result = await agent.run("Weather in Oslo?", output_type=Weather)
    assert result.output == Weather(city="Oslo", celsius=21)
    assert "final_result" in model.calls[1][0][-1].content


async def test_an_output_that_never_fits_stops_after_the_retries_allowed_with_a_clear_error():
    bad = final({"city": "Oslo"})
    agent, model = run_with(bad, bad, output_type=Weather, usage_limits=UsageLimits(max_output_retries=1))
    result = await agent.run("Weather in Oslo?", output_type=Weather)
    assert result.output is None and len(model.calls) == 2
    (error,) = result.errors
    assert error.code == 400 and error.details == {"limit": "max_output_retries"}
    assert "celsius" in error.message and "2 tries" in error.message


async def test_a_type_that_is_not_an_object_is_asked_for_wrapped():
    agent, model = run_with(final({"result": ["Oslo", "Lima"]}), output_type=list[str])
    result = await agent.run("Two cities?", output_type=list[str])
    assert result.output == ["Oslo", "Lima"]
    (offered,) = [spec for spec in model.calls[0][1] if spec.name == "final_result"]
    assert offered.parameters["required"] == ["result"]


async def test_in_process_and_over_http_a_remote_output_is_validated_or_reported(both_scripted_output):
    for agent in both_scripted_output:
        typed = await agent.run("output", output_type=Weather)
        assert typed.output == Weather(city="Lima", celsius=19) and not typed.errors
        wrong = await agent.run("output:wrong", output_type=Weather)
        assert wrong.output is None and wrong.errors[-1].code == 502 and "not a Weather" in wrong.errors[-1].message
        # An agent with no output type of its own (and any over HTTP): the JSON as it came.
        assert agent.output_type is None
        assert (await agent.run("output")).output == {"city": "Lima", "celsius": 19}


async def test_through_an_openai_compatible_server_an_invalid_output_is_corrected(model):
    model.enqueue(
        stream_reply(tool_calls=[("call_1", "final_result", {"city": "Oslo", "celsius": "warm"})]),
        stream_reply(tool_calls=[("call_2", "final_result", {"city": "Oslo", "celsius": 21})]),
    )
    chat = OpenAIChatModel("gpt-test", base_url=model.base_url)
    result = await Agent(LLMAgent(model=chat, output_type=Weather)).run("Weather?", output_type=Weather)
    await chat.aclose()
    assert result.output == Weather(city="Oslo", celsius=21) and not result.errors
    first, second = model.completion_requests
    assert first.body["tools"][0]["function"]["name"] == "final_result"
    told = second.body["messages"][-1]
    assert told["role"] == "tool" and told["tool_call_id"] == "call_1" and "celsius" in told["content"]
