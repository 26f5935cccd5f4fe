"""What a provider's error text keeps on its way to the log: its own words, never a key or our prompt."""

from __future__ import annotations

import json

import pytest

from sentient_assist.llm.redaction import MIN_SENT_RUN, mask_secrets, mask_sent_text, masked_excerpt

CONFIGURED_KEY = "my-own-key-without-any-usual-shape"


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        ("Incorrect API key provided: sk-test***-key.", "Incorrect API key provided: sk-***."),
        ("Incorrect API key provided: sk-proj-AbC123dEf456.", "Incorrect API key provided: sk-***."),
        ("Invalid API Key gsk_AbCdEf1234567890 for hf_abcdefghijk", "Invalid API Key gsk_*** for hf_***"),
        ("header was 'Bearer abc.def-ghi'", "header was 'Bearer ***'"),
        ("Basic dXNlcjpwYXNz denied", "Basic *** denied"),
        ("GET /v1/models?api_key=short&x=1 failed", "GET /v1/models?api_key=***&x=1 failed"),
        ('{"token": "abc", "password": "hunter2"}', '{"token": "***", "password": "***"}'),
        ("session eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0 expired", "session ***.*** expired"),
        ("key 0123456789abcdef0123456789abcdef is revoked", "key *** is revoked"),
        (f"key {CONFIGURED_KEY} is revoked", "key *** is revoked"),
    ],
)
def test_anything_that_looks_like_a_key_is_masked(text, masked):
    assert mask_secrets(text, [CONFIGURED_KEY]) == masked


@pytest.mark.parametrize(
    "text",
    [
        "Rate limit reached for gpt-4o-mini on requests per min (RPM): Limit 3, Used 3.",
        "The model `accounts/fireworks/models/llama-v3p1-70b-instruct` does not exist.",
        "This model's maximum context length is 128000 tokens. However, you requested 130512 tokens.",
        "trace 123e4567-e89b-12d3-a456-426614174000 for claude-3-5-sonnet-20241022",
    ],
)
def test_what_an_operator_needs_is_kept(text):
    assert mask_secrets(text, [CONFIGURED_KEY]) == text


def test_a_short_configured_key_is_not_masked_everywhere():
    # A local server's placeholder key ("x") is no secret; masking it would mangle every message.
    assert mask_secrets("max tokens exceeded", ["x"]) == "max tokens exceeded"


PROMPT = "Please summarise PROMPT-MARKER-4242: my tax return for 2023, line by line.\nThank you."


@pytest.mark.parametrize(
    "text",
    [
        f"Invalid content: '{PROMPT}'",
        f"Invalid content: '{PROMPT[:40]}' (truncated)",
        "Field required; input: " + json.dumps({"messages": [{"role": "user", "content": PROMPT}]}),
        "Field required; input: " + repr({"messages": [{"role": "user", "content": PROMPT}]}),
    ],
    ids=["whole", "part", "echoed-json", "echoed-python"],
)
def test_text_we_sent_is_masked_wherever_it_is_quoted(text):
    masked = mask_sent_text(text, ["You are terse.", PROMPT])
    assert "PROMPT-MARKER" not in masked and "tax return" not in masked
    assert "[sent text]" in masked and masked.startswith(("Invalid content: '", "Field required; input: "))


def test_the_providers_own_words_are_kept():
    text = "Incorrect API key provided: sk-***. You can find your API key at https://platform.openai.com."
    assert mask_sent_text(text, ["You are a helpful assistant. Use the tools.", PROMPT, "hi"]) == text


def test_only_runs_as_long_as_the_minimum_count():
    sent = ["abcdefghijklmnopqrstuvwxyz"]
    assert mask_sent_text("x " + "abcdefghijklmnopqrstuvwxyz"[:MIN_SENT_RUN] + " y", sent) == "x [sent text] y"
    assert mask_sent_text("x " + "abcdefghijklmnopqrstuvwxyz"[: MIN_SENT_RUN - 1] + " y", sent) == (
        "x " + "abcdefghijklmnopqrstuvwxyz"[: MIN_SENT_RUN - 1] + " y"
    )


def test_an_excerpt_is_short_and_masked_even_where_the_text_is_cut():
    key = "sk-proj-" + "Ab1" * 20
    excerpt = masked_excerpt(f"Bad request: {PROMPT} " + "x " * 8 + key, sent=[PROMPT], limit=60)
    assert excerpt == "Bad request: [sent text] x x x x x x x x …"  # the key, cut at the 120th character, is left out
    long = "The server had an error. " * 20
    assert masked_excerpt(long, limit=60) == long[:59] + "…"
    assert masked_excerpt("Rate limit reached.", known=[CONFIGURED_KEY], sent=[PROMPT]) == "Rate limit reached."
