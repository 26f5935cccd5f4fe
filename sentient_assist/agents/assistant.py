"""A language model with a few safe, offline tools: the time anywhere, and arithmetic."""

import ast
import operator
from collections.abc import Callable
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from sentient_assist import LLMAgent, ModelSettings, OpenAIChatModel, load_settings, tool

SYSTEM_PROMPT = (
    "You are a helpful assistant. Use the tools for the current time and for arithmetic "
    "instead of guessing; then answer clearly and concisely."
)

_OPERATORS: dict[type[ast.AST], Callable[..., Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
}
MAX_EXPONENT = 1000
MAX_EXPRESSION_LENGTH = 500
MAX_RESULT_BITS = 100_000  # bounds the work of ** and * on whole numbers (about 30,000 digits)


@tool(timeout=5)
def current_time(time_zone: str = "UTC") -> str:
    """The current date and time in a time zone.

    Args:
        time_zone: an IANA time zone name, such as Europe/Paris or America/New_York
    """
    try:
        zone = ZoneInfo(time_zone)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown time zone {time_zone!r}; use an IANA name such as Europe/Paris") from None
    return datetime.now(zone).isoformat(timespec="seconds")


@tool(timeout=5)
def calculate(expression: str) -> float | int:
    """Evaluate an arithmetic expression: numbers, + - * / // % ** and parentheses.

    Args:
        expression: the expression, e.g. (17 * 3) / 4
    """
    if len(expression) > MAX_EXPRESSION_LENGTH:
        raise ValueError(f"the expression is longer than {MAX_EXPRESSION_LENGTH} characters")
    return _evaluate(ast.parse(expression, mode="eval").body)


def _evaluate(node: ast.AST) -> float | int:
    """Arithmetic only: anything else (names, calls, attributes) is refused, never run."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPERATORS:
        result: float | int = _OPERATORS[type(node.op)](_evaluate(node.operand))
        return result
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > MAX_EXPONENT:
            raise ValueError(f"exponents above {MAX_EXPONENT} are not allowed")
        if isinstance(left, int) and isinstance(right, int) and _result_bits(node.op, left, right) > MAX_RESULT_BITS:
            raise ValueError("the result would be too large")
        combined: float | int = _OPERATORS[type(node.op)](left, right)
        return combined
    raise ValueError(f"only numbers and arithmetic operators are allowed, not {type(node).__name__}")


def _result_bits(op: ast.operator, left: int, right: int) -> int:
    if isinstance(op, ast.Pow):
        return left.bit_length() * abs(right)
    if isinstance(op, ast.Mult):
        return left.bit_length() + right.bit_length()
    return max(left.bit_length(), right.bit_length())


def agent() -> LLMAgent:
    settings = load_settings()
    return LLMAgent(
        name="assistant",
        description="A language model (MODEL_NAME) with offline tools: the current time, a calculator.",
        model=OpenAIChatModel.from_settings(settings),
        system_prompt=SYSTEM_PROMPT,
        tools=[current_time, calculate],
        model_settings=ModelSettings(temperature=settings.model_temperature, max_tokens=settings.model_max_tokens),
    )
