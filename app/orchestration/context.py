"""Context signals for each agent call ("sloshing") and the data slush passed between agents.

Built per call from the prompt and the session's history; never stored on an agent.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from pydantic import BaseModel, ConfigDict, Field

from app.protocol.history import Message

MEMORY_ECHOES = 3
KEYWORDS = 5
MAX_SIGNAL_CHARS = 10_000  # of each prompt and turn read for signals: bounded work on any input
_WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)?", re.UNICODE)
_STOPWORDS = frozenset(
    "a an and are as at be but by can could do does for from had has have how i if in into is it its me my "
    "of on or our please should so than that the their them then there these they this to was we were what "
    "when where which who why will with would you your".split()
)
_QUESTION_STARTS = (
    "who",
    "what",
    "when",
    "where",
    "why",
    "how",
    "which",
    "is",
    "are",
    "can",
    "could",
    "do",
    "does",
    "should",
    "will",
    "would",
)


class _Signals(BaseModel):
    model_config = ConfigDict(frozen=True)


class TemporalSignals(_Signals):
    time_zone: str
    iso: str
    hour: int
    time_of_day: str  # night, morning, afternoon, evening
    day_of_week: str
    is_weekend: bool


class QuerySignals(_Signals):
    word_count: int
    is_question: bool
    keywords: tuple[str, ...]


class BehaviouralSignals(_Signals):
    interaction_count: int  # earlier turns in this session
    session_length: int  # words in those turns, prompts and answers


class MemoryEcho(_Signals):
    """An earlier turn of this session that shares words with the prompt."""

    turn: int
    prompt: str
    shared_words: tuple[str, ...]


class Orientation(_Signals):
    """A first reading of the request: how sure the signals are, an approach, and hints."""

    confidence: float
    approach: str  # answer, clarify, act, continue
    hints: tuple[str, ...]


class DataSlush(_Signals):
    """Curated signals one agent hands to the next: who made them, what, and how sure."""

    source_agent: str
    signals: dict[str, Any] = Field(default_factory=dict)
    confidence: float = Field(0.5, ge=0, le=1)

    @classmethod
    def of(cls, value: DataSlush | Mapping[str, Any]) -> DataSlush:
        """A DataSlush, or openrappter's plain `data_slush` dict (`source_agent`, `signals`,
        `confidence`, or just the signals themselves)."""
        if isinstance(value, DataSlush):
            return value
        signals = value.get("signals")
        confidence = value.get("confidence")
        return cls(
            source_agent=str(value.get("source_agent") or "upstream"),
            signals=dict(signals) if isinstance(signals, Mapping) else {k: v for k, v in value.items()},
            confidence=confidence if isinstance(confidence, (int, float)) and 0 <= confidence <= 1 else 0.5,
        )


class CallContext(_Signals):
    """Everything an agent call is told about its situation; read a value with get_signal()."""

    temporal: TemporalSignals
    query: QuerySignals
    behavioural: BehaviouralSignals
    memory_echoes: tuple[MemoryEcho, ...]
    orientation: Orientation
    upstream_slush: DataSlush | None = None
    call_chain: tuple[str, ...] = ()

    def get_signal(self, path: str, default: Any = None) -> Any:
        """A signal by dot path: `temporal.time_of_day`, `query.keywords`, `upstream_slush.signals.city`."""
        value: Any = self
        for part in path.split("."):
            if isinstance(value, BaseModel):
                value = getattr(value, part, None)
            elif isinstance(value, dict):
                value = value.get(part)
            elif isinstance(value, (list, tuple)) and part.isdigit() and int(part) < len(value):
                value = value[int(part)]
            else:
                return default
            if value is None:
                return default
        return value


def words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def build_context(
    prompt: str,
    history: Sequence[Message] = (),
    *,
    time_zone: str = "UTC",
    now: datetime | None = None,
    upstream_slush: DataSlush | None = None,
    call_chain: tuple[str, ...] = (),
) -> CallContext:
    prompt = prompt[:MAX_SIGNAL_CHARS]
    turns = [(p[:MAX_SIGNAL_CHARS], a[:MAX_SIGNAL_CHARS]) for p, a in _turns(history)]
    query = _query(prompt)
    echoes = _echoes(query.keywords, prompt, turns)
    return CallContext(
        temporal=_temporal(now or datetime.now(ZoneInfo(time_zone)), time_zone),
        query=query,
        behavioural=BehaviouralSignals(
            interaction_count=len(turns),
            session_length=sum(len(words(p)) + len(words(a)) for p, a in turns),
        ),
        memory_echoes=echoes,
        orientation=_orientation(query, echoes, upstream_slush),
        upstream_slush=upstream_slush,
        call_chain=call_chain,
    )


def _turns(history: Sequence[Message]) -> list[tuple[str, str]]:
    turns: list[tuple[str, str]] = []
    for message in history:
        if message.role == "user":
            turns.append((message.content, ""))
        elif turns:
            turns[-1] = (turns[-1][0], message.content)
    return turns


def _temporal(now: datetime, time_zone: str) -> TemporalSignals:
    hour = now.astimezone(ZoneInfo(time_zone)).hour
    part = (
        "night"
        if hour < 5
        else "morning"
        if hour < 12
        else "afternoon"
        if hour < 17
        else "evening"
        if hour < 22
        else "night"
    )
    return TemporalSignals(
        time_zone=time_zone,
        iso=now.isoformat(timespec="seconds"),
        hour=hour,
        time_of_day=part,
        day_of_week=now.strftime("%A"),
        is_weekend=now.weekday() >= 5,
    )


def _query(prompt: str) -> QuerySignals:
    all_words = words(prompt)
    counts: dict[str, int] = {}
    for word in all_words:
        if word not in _STOPWORDS and len(word) > 2:
            counts[word] = counts.get(word, 0) + 1
    # Most frequent first; the sort is stable and `counts` keeps first-seen order, so ties keep it.
    keywords = tuple(sorted(counts, key=counts.__getitem__, reverse=True)[:KEYWORDS])
    stripped = prompt.strip()
    is_question = stripped.endswith("?") or (bool(all_words) and all_words[0] in _QUESTION_STARTS)
    return QuerySignals(word_count=len(all_words), is_question=is_question, keywords=keywords)


def _echoes(keywords: tuple[str, ...], prompt: str, turns: list[tuple[str, str]]) -> tuple[MemoryEcho, ...]:
    wanted = {w for w in words(prompt) if w not in _STOPWORDS and len(w) > 2}
    scored = []
    for index, (earlier, _) in enumerate(turns):
        shared = tuple(sorted(wanted & set(words(earlier))))
        if shared:
            scored.append((len(shared), index, MemoryEcho(turn=index, prompt=earlier, shared_words=shared)))
    scored.sort(key=lambda item: (-item[0], -item[1]))  # most shared words, then the most recent
    return tuple(echo for _, _, echo in scored[:MEMORY_ECHOES])


def _orientation(query: QuerySignals, echoes: tuple[MemoryEcho, ...], upstream: DataSlush | None) -> Orientation:
    hints: list[str] = []
    if echoes:
        hints.append(f"continues turn {echoes[0].turn}: {', '.join(echoes[0].shared_words)}")
    if upstream is not None:
        hints.append(f"builds on {upstream.source_agent}")
    if query.word_count < 3:
        approach, confidence = "clarify", 0.3
    elif echoes:
        approach, confidence = "continue", 0.7
    elif query.is_question:
        approach, confidence = "answer", 0.6
    else:
        approach, confidence = "act", 0.5
    if upstream is not None:
        confidence = round((confidence + upstream.confidence) / 2, 2)
    return Orientation(confidence=confidence, approach=approach, hints=tuple(hints))
