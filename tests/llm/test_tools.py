"""@tool: schemas from signatures, validation before the call, failures as the tool's error."""

from __future__ import annotations

import asyncio

import pytest

from agents.assistant import calculate, current_time
from app import tool


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
