"""@tool: schemas from signatures, validation before the call, failures as the tool's error."""

from __future__ import annotations

import asyncio
import functools
import json
import re

import pytest

from sentient_assist import Agent, AskUser, LLMAgent, tool
from sentient_assist.agents.assistant import calculate, current_time
from sentient_assist.compat import BasicAgent, agent_tool
from sentient_assist.runtime.agent import AbstractAgent
from sentient_assist.testing import ScriptedCall, ScriptedModel, ScriptedReply


@tool
def add(a: int, b: int = 2) -> int:
    """Add two numbers.

    Args:
        a: the first number
        b: the second number
    """
    return a + b


@tool(timeout=0.2)
async def slow(seconds: float) -> str:
    """Sleep."""
    await asyncio.sleep(seconds)
    return "woke"


@tool
def broken() -> None:
    """Always fails."""
    raise RuntimeError("disk on fire")


@tool
def nothing() -> None:
    """Returns nothing."""


def test_the_schema_comes_from_the_signature_and_docstring():
    spec = add.spec
    assert spec.name == "add" and spec.description == "Add two numbers."
    assert spec.parameters["required"] == ["a"]
    assert spec.parameters["properties"]["a"] == {"description": "the first number", "title": "A", "type": "integer"}
    assert spec.parameters["properties"]["b"]["default"] == 2
    assert spec.parameters["additionalProperties"] is False


@pytest.mark.parametrize(
    ("arguments", "result", "error"),
    [
        ('{"a": 1}', 3, None),
        ('{"a": 1, "b": 5}', 6, None),
        ('{"a": "one"}', None, "invalid arguments: a: Input should be a valid integer"),
        ('{"b": 1}', None, "invalid arguments: a: Field required"),
        ('{"a": 1, "c": 1}', None, "invalid arguments: c: Extra inputs are not permitted"),
        ("[1, 2]", None, "the arguments must be a JSON object"),
        ('{"a": 1', None, "the arguments are not valid JSON"),
    ],
)
async def test_arguments_are_validated_before_the_call(arguments, result, error):
    outcome = await add.call(arguments)
    assert outcome.result == result
    assert (outcome.error or "").startswith(error or "")
    assert (outcome.error is None) == (error is None)


async def test_failures_and_timeouts_become_the_tools_error():
    failed = await broken.call("{}")
    assert failed.error == "the tool failed (RuntimeError)"  # what the user sees: no internals
    assert failed.model_content == "error: RuntimeError: disk on fire"  # what the model reads
    timed_out = await slow.call('{"seconds": 5}')
    assert timed_out.result is None and "did not finish within 0.2 seconds" in timed_out.error
    assert (await slow.call('{"seconds": 0}')).result == "woke"


async def test_a_result_is_never_null():
    outcome = await nothing.call("{}")
    assert outcome.result == "ok" and outcome.error is None


@pytest.mark.parametrize(
    ("expression", "value"),
    [("1 + 2 * 3", 7), ("(17 * 3) / 4", 12.75), ("-2 ** 3", -8), ("7 // 2 + 7 % 2", 4), ("2 ** 10", 1024)],
)
async def test_the_calculator_does_arithmetic(expression, value):
    assert (await calculate.call(f'{{"expression": "{expression}"}}')).result == value


@pytest.mark.parametrize(
    "expression",
    ["__import__('os').system('true')", "open('/etc/passwd')", "a + 1", "2 ** 100000", "[1, 2]", "1 +", "'a' * 3"],
)
async def test_the_calculator_refuses_anything_but_arithmetic(expression):
    import json

    outcome = await calculate.call(json.dumps({"expression": expression}))
    assert outcome.result is None and outcome.error


async def test_the_clock_knows_time_zones_and_refuses_unknown_ones():
    paris = await current_time.call('{"time_zone": "Europe/Paris"}')
    assert paris.error is None and paris.result[-6:] in ("+01:00", "+02:00")
    assert "unknown time zone" in (await current_time.call('{"time_zone": "Mars/Olympus"}')).error


@tool
def infinite() -> float:
    """Not a JSON number."""
    return float("inf")


async def test_results_and_arguments_json_cannot_carry_are_the_tools_error_not_a_crash():
    assert "cannot be written as JSON" in (await infinite.call("{}")).error
    assert "not valid JSON" in (await add.call('{"a": NaN}')).error
    assert "not valid JSON" in (await add.call('{"a": ' + "9" * 5000 + "}")).error
    huge = await calculate.call('{"expression": "((9**999)**999)**999"}')
    assert huge.result is None and ("too large" in huge.error or "exponents" in huge.error)


# --- what LLMAgent(tools=[...]) takes: functions, coroutine functions, BasicAgents, Tools ---


def double(n: int) -> int:
    """Double a number.

    Args:
        n: the number
    """
    return n * 2


async def shout(text: str) -> str:
    """Say it louder."""
    await asyncio.sleep(0)
    return text.upper()


class Weather(BasicAgent):
    """An openrappter agent: its metadata is the tool's schema, perform() its call."""

    def __init__(self):
        self.name = "Weather"
        self.metadata = {
            "name": self.name,
            "description": "The weather in a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        }
        super().__init__(name=self.name, metadata=self.metadata)

    def perform(self, **kwargs):
        return json.dumps({"status": "success", "response": f"Sunny in {kwargs['city']}"})


def calling(*calls: ScriptedCall) -> ScriptedModel:
    """A model that calls the tools, then answers once it has read their results."""
    return ScriptedModel([ScriptedReply(tool_calls=calls), ScriptedReply(text="Done.")])


def tool_messages(model: ScriptedModel) -> dict[str, str]:
    """What the model read back from each tool, by name (in its second request)."""
    return {m.name: m.content for m in model.calls[1][0] if m.role == "tool"}


async def test_plain_and_coroutine_functions_are_tools_as_at_tool_makes_them():
    model = calling(ScriptedCall("double", {"n": 21}), ScriptedCall("shout", {"text": "hi"}))
    agent = LLMAgent(model=model, tools=[double, shout])
    assert agent.tools["double"].spec == tool(double).spec and agent.tools["shout"].spec == tool(shout).spec
    result = await Agent(agent).run("go")
    assert not result.errors and result.text == "Done."
    assert [(c.name, c.result) for c in result.tool_calls] == [("double", 42), ("shout", "HI")]
    assert tool_messages(model) == {"double": "42", "shout": '"HI"'}  # the results reached the model
    offered = {spec.name: spec for spec in model.calls[0][1]}
    assert offered["double"].description == "Double a number."
    assert offered["double"].parameters["properties"]["n"]["description"] == "the number"


async def test_a_basic_agent_is_a_tool_its_metadata_the_schema():
    model = calling(ScriptedCall("Weather", {"city": "Oslo"}))
    result = await Agent(LLMAgent(model=model, tools=[Weather()])).run("weather in Oslo?")
    assert not result.errors and result.text == "Done."
    (offered,) = model.calls[0][1]
    assert (offered.name, offered.description) == ("Weather", "The weather in a city")
    assert offered.parameters["required"] == ["city"]
    (call,) = result.tool_calls
    assert call.result == {"status": "success", "response": "Sunny in Oslo"}
    assert "Sunny in Oslo" in tool_messages(model)["Weather"]


def test_a_tool_and_an_agent_tool_are_taken_as_they_are():
    made, adapted = tool(double), agent_tool(Weather(), timeout=3)
    agent = LLMAgent(model=ScriptedModel([]), tools=[made, adapted])
    assert agent.tools == {"double": made, "Weather": adapted}


class NotABasicAgent(AbstractAgent):
    async def assist(self, session, query, response_handler):
        await response_handler.complete()


@pytest.mark.parametrize(
    ("tools", "message"),
    [
        (
            [double, shout, "double"],
            "tools[2] is a str: pass a function, a coroutine function, a Tool or a BasicAgent",
        ),
        ([42], "tools[0] is an int: pass a function"),
        ([double, Weather], "tools[1] is the class Weather: pass a function, a coroutine function, a Tool or a "),
        ([NotABasicAgent()], "tools[0] is a NotABasicAgent: pass a function"),
        ([functools.partial(double, 2)], "tools[0] is a partial: pass a function"),
        (double, "tools= takes a list of tools, got a function: write tools=[double]"),
        ([double, lambda *numbers: 0], "tools[1]: tool <lambda>: *args and **kwargs cannot be described"),
    ],
)
def test_anything_else_is_refused_when_the_agent_is_built_naming_its_position_and_type(tools, message):
    with pytest.raises(TypeError) as raised:
        LLMAgent(model=ScriptedModel([]), tools=tools)
    assert str(raised.value).startswith(message)


@pytest.mark.parametrize(
    ("tools", "options", "message"),
    [
        ([double, tool(double)], {}, "tools[0] and tools[1] are both named 'double'"),
        ([Weather(), shout, Weather()], {}, "tools[0] and tools[2] are both named 'Weather'"),
        ([tool(name="shout")(double), shout], {}, "tools[0] and tools[1] are both named 'shout'"),
        ([tool(name="final_result")(double)], {"output_type": int}, "tools[0] is named 'final_result'"),
        ([tool(name="ask_user")(double)], {"ask_user": AskUser()}, "tools[0] is named 'ask_user'"),
    ],
)
def test_two_tools_of_one_name_are_refused_naming_both(tools, options, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        LLMAgent(model=ScriptedModel([]), tools=tools, **options)
    if not options:  # the same names are fine apart
        LLMAgent(model=ScriptedModel([]), tools=tools[:1])
