"""Router rules: priority and order, conditions, metadata by dot path, the default, bad rules, and
regex searches bounded in time and length."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import pytest

from sentient_assist.exceptions import NoRouteError
from sentient_assist.orchestration.context import build_context
from sentient_assist.orchestration.rules import Route, Router, Rule, flatten, request_metadata
from tests.orchestration.broadcast_agents import EchoAgent

ONE = EchoAgent("one")
TWO = EchoAgent("two")
THREE = EchoAgent("three")
FALLBACK = EchoAgent("fallback-agent")


def picked(route: Route) -> tuple[str, str]:
    return route.agent_name, route.reason


def test_lower_priority_numbers_first_as_openrappter_and_ties_keep_the_order_they_were_added_in():
    router = Router()
    router.add(name="anything", agent=ONE, prompt_pattern=".", priority=9)
    router.add(name="first-five", agent=TWO, prompt_pattern="x", priority=5)
    router.add(Rule(name="second-five", agent=THREE, prompt_pattern="x", priority=5))
    router.add(name="urgent", agent=THREE, prompt_pattern="!", priority=-1)
    assert [rule.name for rule in router.rules] == ["urgent", "first-five", "second-five", "anything"]
    assert picked(router.route("x")) == ("two", "first-five")
    assert picked(router.route("x!")) == ("three", "urgent")
    assert picked(router.route("y")) == ("one", "anything")


def test_rules_match_on_sender_channel_and_group_membership():
    router = Router(default=FALLBACK)
    router.add(name="boss", agent=ONE, sender="ana")
    router.add(name="slack-admins", agent=TWO, channel="slack", group="admins")
    router.add(name="web", agent=THREE, channel="assist", prompt_pattern="(?i)price")
    assert picked(router.route("hi", sender="ana")) == ("one", "boss")
    assert picked(router.route("hi", sender="bo", channel="slack", groups=["users", "admins"])) == (
        "two",
        "slack-admins",
    )
    assert picked(router.route("hi", sender="bo", channel="slack", groups=["users"]))[1] == "default"
    assert picked(router.route("The price?", channel="assist")) == ("three", "web")
    assert picked(router.route("The price?", channel="slack"))[1] == "default"


def test_conditions_are_combined_with_and():
    router = Router(default=FALLBACK)
    router.add(
        name="all-three",
        agent=ONE,
        prompt_pattern=r"(?i)\bweather\b",
        processor_id="p-1",
        metadata={"query.is_question": True},
    )
    question = {"query": {"is_question": True}}
    assert picked(router.route("Weather?", processor_id="p-1", metadata=question)) == ("one", "all-three")
    assert router.route("Weather?", processor_id="p-2", metadata=question).rule is None
    assert router.route("Weather?", processor_id="p-1", metadata={"query.is_question": False}).rule is None
    assert router.route("Sunny?", processor_id="p-1", metadata=question).rule is None
    assert router.route("Weather?", processor_id="p-1").rule is None  # a key missing is no match


def test_processor_id_must_equal_the_sessions():
    router = Router(default=FALLBACK)
    router.add(name="vip", agent=ONE, processor_id="vip")
    assert router.route("hi", processor_id="vip").agent is ONE
    assert router.route("hi", processor_id="vip2").agent is FALLBACK
    assert router.route("hi").agent is FALLBACK


def test_metadata_keys_are_dot_paths_of_the_context_signals_with_the_callers_fields_over_them():
    night = datetime(2025, 1, 4, 23, 30, tzinfo=UTC)  # a Saturday
    context = build_context("Is it going to rain in Oslo tonight?", now=night)
    metadata = request_metadata(context, {"user": {"tier": "gold"}, "query.word_count": 99})
    assert metadata["temporal.time_of_day"] == "night" and metadata["query.is_question"] is True
    assert metadata["user.tier"] == "gold" and metadata["query.word_count"] == 99

    router = Router(default=FALLBACK)
    router.add(name="night-questions", agent=ONE, metadata={"query.is_question": True, "temporal.time_of_day": "night"})
    router.add(name="weekend-gold", agent=TWO, metadata={"temporal.is_weekend": True, "user.tier": "gold"})
    router.add(name="keywords", agent=THREE, metadata={"query.keywords": ["going", "rain", "oslo", "tonight"]})
    assert picked(router.route("x", metadata=metadata)) == ("one", "night-questions")
    day = request_metadata(build_context("Is it going to rain in Oslo tonight?", now=night.replace(hour=13)))
    assert picked(router.route("x", metadata={**day, "user": {"tier": "gold"}})) == ("two", "weekend-gold")
    assert picked(router.route("x", metadata={**day, "temporal.is_weekend": False})) == ("three", "keywords")


def test_metadata_values_must_be_equal_in_kind_too():
    router = Router(default=FALLBACK)
    router.add(name="flag", agent=ONE, metadata={"flag": True})
    assert router.route("x", metadata={"flag": 1}).rule is None
    assert router.route("x", metadata={"flag": True}).rule is not None


def test_flatten_keeps_each_inner_mapping_and_is_idempotent():
    flat = flatten({"a": {"b": {"c": 1}}, "d.e": 2})
    assert flat == {"a": {"b": {"c": 1}}, "a.b": {"c": 1}, "a.b.c": 1, "d.e": 2}
    assert flatten(flat) == flat


def test_the_default_takes_what_no_rule_does_and_without_one_routing_is_an_error():
    with_default = Router(default=FALLBACK)
    with_default.add(name="hello", agent=ONE, prompt_pattern="hello")
    route = with_default.route("goodbye")
    assert route.agent is FALLBACK and route.rule is None and route.reason == "default"
    without = Router()
    without.add(name="hello", agent=ONE, prompt_pattern="hello")
    with pytest.raises(LookupError, match="no default agent"):
        without.route("goodbye")
    assert without.match("goodbye") is None and without.match("hello").agent is ONE


def test_an_invalid_regex_is_rejected_when_its_rule_is_added():
    router = Router()
    with pytest.raises(ValueError, match=r"rule 'broken': invalid prompt_pattern '\(unclosed': missing \)"):
        router.add(name="broken", agent=ONE, prompt_pattern="(unclosed")
    assert len(router) == 0


def test_bad_rules_say_what_to_do():
    with pytest.raises(ValueError, match=r"no condition.*Router\(default=\.\.\.\)"):
        Rule(name="nothing", agent=ONE)
    with pytest.raises(ValueError, match=r"Router\(default=\.\.\.\)"):
        Rule(name="empty", agent=ONE, prompt_pattern="")
    with pytest.raises(ValueError, match=r"Router\(default=\.\.\.\)"):
        Rule(name="empty-metadata", agent=ONE, metadata={})
    with pytest.raises(TypeError, match="AbstractAgent"):
        Rule(name="not-an-agent", agent="one", prompt_pattern="x")  # type: ignore[arg-type]
    router = Router()
    router.add(name="twice", agent=ONE, prompt_pattern="x")
    with pytest.raises(ValueError, match="already"):
        router.add(name="twice", agent=TWO, prompt_pattern="x")
    with pytest.raises(TypeError, match="not both"):
        router.add(Rule(name="r", agent=ONE, prompt_pattern="x"), priority=3)
    with pytest.raises(NoRouteError, match=r"Router\(default=\.\.\.\)"):
        router.route("nothing matches this")


def test_a_rule_is_a_frozen_value():
    rule = Rule(name="r", agent=ONE, metadata={"a": 1})
    with pytest.raises(AttributeError):
        rule.priority = 3  # type: ignore[misc]
    with pytest.raises(TypeError):
        rule.metadata["a"] = 2  # type: ignore[index]


@pytest.mark.timeout(10)
def test_a_catastrophic_regex_counts_as_no_match_instead_of_hanging(caplog):
    router = Router(default=FALLBACK, regex_timeout=0.05)
    router.add(name="nested", agent=ONE, prompt_pattern=r"(a+)+$")
    router.add(name="alternation", agent=TWO, prompt_pattern=r"(a|aa)+$")
    prompt_nested = "a" * 30 + "b"
    prompt_alternation = "a" * 60 + "b"  # about 10**12 paths for a backtracking engine
    with caplog.at_level(logging.WARNING, logger="sentient_assist.orchestration"):
        assert router.route(prompt_nested).agent is FALLBACK
        assert router.route(prompt_alternation).agent is FALLBACK
    timed_out = [r for r in caplog.records if "ran past" in r.getMessage()]
    assert len(timed_out) >= 1 and "'alternation'" in timed_out[-1].getMessage()
    assert all(prompt_alternation not in r.getMessage() for r in caplog.records)
    assert router.route("aaaa").rule.name == "nested"  # the same rules still match what they should


def test_only_the_first_max_prompt_chars_are_searched():
    router = Router(default=FALLBACK, max_prompt_chars=100)
    router.add(name="needle", agent=ONE, prompt_pattern="needle")
    assert router.route("needle" + "x" * 1000).agent is ONE
    assert router.route("x" * 1000 + "needle").agent is FALLBACK
    assert router.route("x" * 94 + "needle").agent is ONE  # ends at character 100
    with pytest.raises(ValueError, match="max_prompt_chars"):
        Router(max_prompt_chars=0)
