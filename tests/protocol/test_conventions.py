"""The reserved payloads: TokenUsage, the one token-count type of a reply, a run and a result."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from sentient_assist.protocol.conventions import TokenUsage


def test_usage_adds_up_field_by_field():
    first = TokenUsage(requests=1, input_tokens=10, output_tokens=5, total_tokens=15)
    second = TokenUsage(requests=1, input_tokens=30, output_tokens=4, total_tokens=34)
    assert first + second == TokenUsage(requests=2, input_tokens=40, output_tokens=9, total_tokens=49)
    assert TokenUsage() + first == first, "the empty usage adds nothing"
    running = TokenUsage()
    running += first
    running += second
    assert running == first + second


def test_a_total_reported_as_zero_is_the_input_and_output_added_up():
    assert TokenUsage(input_tokens=10, output_tokens=5).total_tokens == 15
    assert TokenUsage.model_validate({"input_tokens": 7, "output_tokens": 2, "total_tokens": 0}).total_tokens == 9
    assert TokenUsage(input_tokens=10, output_tokens=5, total_tokens=20).total_tokens == 20, "a reported total stands"
    assert TokenUsage(requests=1) + TokenUsage(input_tokens=3, output_tokens=4) == TokenUsage(
        requests=1, input_tokens=3, output_tokens=4, total_tokens=7
    )


def test_nothing_reported_is_zero_everywhere_and_frames_as_the_usage_payload():
    nothing = {"requests": 0, "input_tokens": 0, "output_tokens": 0, "total_tokens": 0}
    assert TokenUsage().model_dump(mode="json") == nothing


def test_usage_is_a_frozen_value():
    usage = TokenUsage(requests=1)
    with pytest.raises(ValidationError):
        usage.requests = 2  # type: ignore[misc]
    assert hash(usage) == hash(TokenUsage(requests=1))
