"""Rules that pick an agent for a request: Rule, Route, Router, and a request's metadata.

    router = Router(default=GeneralAgent())
    router.add(name="weather", agent=WeatherAgent(), prompt_pattern=r"(?i)\\bweather\\b", priority=1)
    router.add(name="night", agent=NightAgent(), metadata={"temporal.time_of_day": "night"})
    route = router.route("What is the weather?", metadata=request_metadata(context))

- Rules are tried by priority, lower numbers first, as openrappter's AgentRouter does;
  rules of equal priority keep the order they were added in. The first rule whose
  conditions all hold wins; else the default agent.
- A rule's conditions are combined with AND: a prompt regex (on the content), the
  request's sender, its channel, a group it belongs to, the session's processor_id,
  metadata fields. A rule has at least one; what no rule matches goes to the default
  agent (`Router(default=...)`).
- Sender, channel and groups: what `route()` is given. RouterAgent takes them from the
  Sentient request: the sender and the recipients (as groups) of the chat's last
  interaction's request, as Sentient Chat records them, and the channel "assist"; its
  `metadata` hook can give `sender`, `channel` and `groups` of its own (a gateway's).
- A regex is compiled once, when its rule is added (an invalid one is rejected there), and
  searched in the first `max_prompt_chars` characters of the prompt with a time limit
  (the `regex` package can interrupt a search; `re` cannot): a search that runs out of
  time counts as no match, and is logged without the prompt. The search runs on the event
  loop, so one rule holds it for at most `regex_timeout` seconds.

A request's metadata is a flat dict of dot paths: `request_metadata(context, extra)` makes
it from the request's CallContext signals (`query.is_question`, `temporal.time_of_day`,
`upstream_slush.signals.city`, ...) with the caller's own fields laid over them.

RouterAgent (router.py) serves a Router at /assist.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import regex
from pydantic import BaseModel

from sentient_assist.facade.agent import Agent
from sentient_assist.orchestration.calls import agent_name
from sentient_assist.orchestration.context import CallContext
from sentient_assist.runtime.agent import AbstractAgent
from sentient_assist.runtime.errors import NoRouteError

logger = logging.getLogger("sentient_assist.orchestration")

DEFAULT_MAX_PROMPT_CHARS = 10_000
DEFAULT_REGEX_TIMEOUT = 0.05  # seconds one rule's prompt search may take


@dataclass(frozen=True)
class Rule:
    """When to send a request to `agent`. Every condition given must hold (AND).

    - `prompt_pattern`: a regex searched in the prompt (`(?i)` at its start ignores case);
    - `sender`, `channel`: equal to the request's;
    - `group`: one of the request's groups;
    - `processor_id`: equal to the session's processor_id;
    - `metadata`: each key present in the request's metadata with an equal value; keys are
      dot paths (`"query.is_question": True`, `"temporal.time_of_day": "night"`).

    A rule for every request is the router's default agent (`Router(default=...)`).
    """

    name: str
    agent: AbstractAgent | Agent
    priority: int = 0
    prompt_pattern: str | None = None
    sender: str | None = None
    channel: str | None = None
    group: str | None = None
    processor_id: str | None = None
    metadata: Mapping[str, object] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"a rule needs a non-empty name, got {self.name!r}")
        if not isinstance(self.agent, (AbstractAgent, Agent)):
            raise TypeError(f"rule {self.name!r}: agent must be an AbstractAgent (or an Agent), got {self.agent!r}")
        if isinstance(self.priority, bool) or not isinstance(self.priority, int):
            raise TypeError(f"rule {self.name!r}: priority must be an int, got {self.priority!r}")
        if self.prompt_pattern is not None and (not isinstance(self.prompt_pattern, str) or not self.prompt_pattern):
            raise ValueError(
                f"rule {self.name!r}: prompt_pattern must be a non-empty regex string, got {self.prompt_pattern!r}; "
                "for every request, give the agent as Router(default=...)"
            )
        if self.metadata is not None:
            if not isinstance(self.metadata, Mapping) or not all(isinstance(k, str) and k for k in self.metadata):
                raise TypeError(f"rule {self.name!r}: metadata must map non-empty str keys (dot paths) to values")
            object.__setattr__(self, "metadata", MappingProxyType(dict(self.metadata)))
        if not self.has_conditions:
            raise ValueError(
                f"rule {self.name!r} has no condition: give prompt_pattern, sender, channel, group, "
                "processor_id or metadata; "
                "for every request, give the agent as Router(default=...)"
            )

    @property
    def has_conditions(self) -> bool:
        return any(
            v is not None for v in (self.prompt_pattern, self.sender, self.channel, self.group, self.processor_id)
        ) or bool(self.metadata)

    @property
    def agent_name(self) -> str:
        return agent_name(self.agent)


@dataclass(frozen=True)
class Route:
    """Where a request goes: the agent, and the rule that sent it there (None: the default)."""

    agent: AbstractAgent | Agent
    rule: Rule | None = None

    @property
    def reason(self) -> str:
        return self.rule.name if self.rule is not None else "default"

    @property
    def agent_name(self) -> str:
        return agent_name(self.agent)


@dataclass(frozen=True)
class _Request:
    """Who a request is from and where: what rules match besides its content."""

    processor_id: str | None
    sender: str | None
    channel: str | None
    groups: frozenset[str]


@dataclass(frozen=True)
class _Entry:
    rule: Rule
    pattern: regex.Pattern[str] | None
    order: int


class Router:
    """Rules in priority order (lower numbers first, ties in the order added); the first match wins."""

    def __init__(
        self,
        default: AbstractAgent | Agent | None = None,
        *,
        max_prompt_chars: int = DEFAULT_MAX_PROMPT_CHARS,
        regex_timeout: float = DEFAULT_REGEX_TIMEOUT,
    ) -> None:
        if default is not None and not isinstance(default, (AbstractAgent, Agent)):
            raise TypeError(f"Router(default=...) must be an AbstractAgent (or an Agent), got {default!r}")
        if isinstance(max_prompt_chars, bool) or not isinstance(max_prompt_chars, int) or max_prompt_chars < 1:
            raise ValueError(f"max_prompt_chars must be a positive int, got {max_prompt_chars!r}")
        if not regex_timeout > 0:
            raise ValueError(f"regex_timeout must be a positive number of seconds, got {regex_timeout!r}")
        self.default = default
        self.max_prompt_chars = max_prompt_chars
        self.regex_timeout = regex_timeout
        self._entries: list[_Entry] = []
        self._added = 0

    def add(self, rule: Rule | None = None, /, **fields: Any) -> Rule:
        """Add a rule, `add(Rule(...))` or `add(name=..., agent=..., ...)`; returns it.

        Its regex is compiled here, once: an invalid one raises ValueError naming the rule.
        """
        if rule is None:
            rule = Rule(**fields)
        elif fields:
            raise TypeError("add() takes a Rule or the fields of one as keywords, not both")
        elif not isinstance(rule, Rule):
            raise TypeError(f"add() takes a Rule, got {type(rule).__name__}")
        if any(entry.rule.name == rule.name for entry in self._entries):
            raise ValueError(f"a rule named {rule.name!r} is already in this router; rule names must be unique")
        pattern = None
        if rule.prompt_pattern is not None:
            try:
                pattern = regex.compile(rule.prompt_pattern)
            except regex.error as exc:
                raise ValueError(f"rule {rule.name!r}: invalid prompt_pattern {rule.prompt_pattern!r}: {exc}") from None
        self._entries.append(_Entry(rule, pattern, self._added))
        self._added += 1
        self._entries.sort(key=lambda entry: (entry.rule.priority, entry.order))
        return rule

    @property
    def rules(self) -> tuple[Rule, ...]:
        """The rules in the order they are tried."""
        return tuple(entry.rule for entry in self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def route(self, prompt: str, **request: Any) -> Route:
        """The first rule that matches, else the default; NoRouteError when neither.
        `request`: `processor_id`, `metadata`, `sender`, `channel`, `groups` (see `match`)."""
        route = self.match(prompt, **request)
        if route is None:
            raise NoRouteError(
                f"no rule matched the request ({len(self._entries)} rules tried) and the router has no default "
                "agent; give Router(default=...) for the requests no rule matches"
            )
        return route

    def match(
        self,
        prompt: str,
        *,
        processor_id: str | None = None,
        metadata: Mapping[str, object] | None = None,
        sender: str | None = None,
        channel: str | None = None,
        groups: Iterable[str] = (),
    ) -> Route | None:
        """`route()`, with None where it would raise."""
        flat = flatten(metadata or {})
        text = prompt[: self.max_prompt_chars]
        request = _Request(processor_id, sender, channel, frozenset(groups))
        for entry in self._entries:
            if self._matches(entry, text, request, flat):
                return Route(entry.rule.agent, entry.rule)
        return Route(self.default) if self.default is not None else None

    def _matches(self, entry: _Entry, text: str, request: _Request, flat: Mapping[str, object]) -> bool:
        rule = entry.rule
        # The cheap conditions first: the regex search runs only if they all hold.
        if rule.processor_id is not None and rule.processor_id != request.processor_id:
            return False
        if rule.sender is not None and rule.sender != request.sender:
            return False
        if rule.channel is not None and rule.channel != request.channel:
            return False
        if rule.group is not None and rule.group not in request.groups:
            return False
        if rule.metadata:
            for key, wanted in rule.metadata.items():
                if key not in flat or not _equal(flat[key], wanted):
                    return False
        if entry.pattern is not None:
            try:
                return entry.pattern.search(text, timeout=self.regex_timeout) is not None
            except TimeoutError:
                logger.warning(
                    "rule %r: its prompt_pattern search ran past %ss and counts as no match",
                    rule.name,
                    self.regex_timeout,
                )
                return False
        return True


def flatten(data: Mapping[str, object] | BaseModel, prefix: str = "") -> dict[str, object]:
    """Nested mappings as one flat dict of dot paths; each inner mapping keeps its own path too.

    `{"query": {"is_question": True}}` -> `{"query": {...}, "query.is_question": True}`.
    Keys that already hold dots stay as they are, so flattening is idempotent.
    """
    if isinstance(data, BaseModel):
        data = data.model_dump()
    flat: dict[str, object] = {}
    for key, value in data.items():
        path = f"{prefix}{key}"
        if isinstance(value, BaseModel):
            value = value.model_dump()
        flat[path] = value
        if isinstance(value, Mapping):
            flat.update(flatten(value, f"{path}."))
    return flat


def request_metadata(
    context: CallContext | None = None, extra: Mapping[str, object] | None = None
) -> dict[str, object]:
    """A request's metadata for routing: its CallContext signals by dot path, `extra` laid over them."""
    metadata = flatten(context) if context is not None else {}
    metadata.update(flatten(extra or {}))
    return metadata


def _normal(value: object) -> object:
    if isinstance(value, (list, tuple)):
        return tuple(_normal(item) for item in value)
    if isinstance(value, Mapping):
        return {key: _normal(item) for key, item in value.items()}
    return value


def _equal(actual: object, wanted: object) -> bool:
    # True must not match 1, nor a list a tuple of other items: equal means equal in kind.
    if isinstance(actual, bool) or isinstance(wanted, bool):
        return isinstance(actual, bool) and isinstance(wanted, bool) and actual == wanted
    return bool(_normal(actual) == _normal(wanted))
