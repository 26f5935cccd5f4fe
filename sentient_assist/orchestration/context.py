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

from sentient_assist.protocol.history import Message

MEMORY_ECHOES = 3
RECENT_MEMORIES = 3
KEYWORDS = 5
ENTITIES = 10
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


_QUESTION_SET = frozenset(_QUESTION_STARTS)
_GREETINGS = frozenset("hi hello hey greetings morning evening thanks thank".split())
_REQUEST_STARTS = frozenset(
    "add book buy calculate call check compare create find get give list make move open order plan put "
    "remind run schedule search send set show start stop summarize tell translate turn write".split()
)
_POSITIVE = frozenset("good great love like thanks thank excellent awesome nice happy glad perfect wonderful".split())
_NEGATIVE = frozenset("bad hate terrible awful wrong broken angry sad problem fail failed error worst annoying".split())
# Capitalised words, numbers, @handles and #tags: what a prompt names, cheaply.
_ENTITY = re.compile(r"[@#]\w+|\b[A-Z][\w'-]*(?:\s+[A-Z][\w'-]*)*|\b\d[\d.,:/-]*\b")


class _Signals(BaseModel):
    model_config = ConfigDict(frozen=True)


class TemporalSignals(_Signals):
    time_zone: str
    iso: str
    hour: int
    minute: int
    time_of_day: str  # night, morning, afternoon, evening
    day_of_week: str
    is_weekend: bool


class QuerySignals(_Signals):
    word_count: int
    is_question: bool
    keywords: tuple[str, ...]
    intent: str  # question, request (an imperative), greeting, statement
    entities: tuple[str, ...]  # capitalised words past the first, numbers, @handles, #tags: at most 10
    sentiment: str  # positive, negative, neutral: a small word list, not a model
    complexity: str  # low, medium, high: by length and clauses


class BehaviouralSignals(_Signals):
    interaction_count: int  # earlier turns in this session
    session_length: int  # words in those turns, prompts and answers
    patterns: tuple[str, ...]  # asks_questions, brief, detailed, returning: what the earlier turns show


class MemorySignals(_Signals):
    recent_memories: tuple[str, ...]  # the last earlier prompts, newest first: at most 3


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
    def of(cls, value: DataSlush | Mapping[str, object]) -> DataSlush:
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
    memory: MemorySignals
    memory_echoes: tuple[MemoryEcho, ...]
    orientation: Orientation
    upstream_slush: DataSlush | None = None
    call_chain: tuple[str, ...] = ()

    def get_signal(self, path: str, default: Any = None) -> Any:
        """A signal by dot path: `temporal.time_of_day`, `query.intent`, `memory.recent_memories`,
        `upstream_slush.city` (or `upstream_slush.signals.city`). `behavioral.` (openrappter's
        spelling) reads `behavioural.`."""
        parts = path.split(".")
        if parts[0] == "behavioral":
            parts[0] = "behavioural"
        if parts[0] == "upstream_slush" and len(parts) > 1 and parts[1] not in DataSlush.model_fields:
            parts.insert(1, "signals")  # upstream_slush.<key>: one of its signals
        value: object = self
        for part in parts:
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
            patterns=_patterns(turns),
        ),
        memory=MemorySignals(recent_memories=tuple(p for p, _ in reversed(turns[-RECENT_MEMORIES:]))),
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
    local = now.astimezone(ZoneInfo(time_zone))
    return TemporalSignals(
        time_zone=time_zone,
        iso=now.isoformat(timespec="seconds"),
        hour=hour,
        minute=local.minute,
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
    return QuerySignals(
        word_count=len(all_words),
        is_question=is_question,
        keywords=keywords,
        intent=_intent(all_words, is_question),
        entities=_entities(prompt),
        sentiment=_sentiment(all_words),
        complexity=_complexity(len(all_words), prompt),
    )


def _intent(all_words: list[str], is_question: bool) -> str:
    if is_question:
        return "question"
    if all_words and all_words[0] in _GREETINGS:
        return "greeting"
    if all_words and (all_words[0] in _REQUEST_STARTS or all_words[:1] == ["please"]):
        return "request"
    return "statement"


def _entities(prompt: str) -> tuple[str, ...]:
    found: list[str] = []
    for index, match in enumerate(_ENTITY.finditer(prompt)):
        token = match.group()
        if index == 0 and token[:1].isupper() and not token.isupper() and token.lower() in _STOPWORDS | _QUESTION_SET:
            continue  # the sentence's first word, capitalised as any first word is
        if token not in found:
            found.append(token)
        if len(found) == ENTITIES:
            break
    return tuple(found)


def _sentiment(all_words: list[str]) -> str:
    score = sum((w in _POSITIVE) - (w in _NEGATIVE) for w in all_words)
    return "positive" if score > 0 else "negative" if score < 0 else "neutral"


def _complexity(word_count: int, prompt: str) -> str:
    clauses = prompt.count(",") + prompt.count(";") + prompt.count(" and ") + prompt.count("?")
    if word_count > 40 or clauses > 4:
        return "high"
    return "medium" if word_count > 12 or clauses > 1 else "low"


def _patterns(turns: list[tuple[str, str]]) -> tuple[str, ...]:
    if not turns:
        return ()
    prompts = [p for p, _ in turns]
    lengths = [len(words(p)) for p in prompts]
    found = ["returning"]
    if sum(p.strip().endswith("?") for p in prompts) * 2 >= len(prompts):
        found.append("asks_questions")
    average = sum(lengths) / len(lengths)
    found.append("brief" if average < 8 else "detailed" if average > 30 else "moderate")
    return tuple(found)


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
