"""Pauses: a run that stops to ask a person, and the next request that resumes it.

The service keeps no per-user store: a pause lives in the conversation. Its ASK_USER (or
INTERRUPT) event carries a token: what was paused (the agent, a digest of the
conversation's prompts up to the paused one, and the agent's own state to go on from),
sealed with the service's secret (its Settings' ASSIST_RESUME_SECRET) by Fernet: encrypted, signed and
time-stamped, so that it can be neither read nor changed. The person's answer
comes back as the next request, its history holding the pause: before the agent runs,
`resumption_of()` finds the pause's token in the last turn, checks it against this very
conversation, and hands the agent a `Resumption`; a token that was not issued here for this
conversation (tampered, on another history, expired) is refused and nothing runs.

A token is bound to who may answer it, when the run knows: the key of the run that paused (a
digest of it) and its thread (AG-UI's threadId, A2A's contextId), sealed in as one digest
(`pause_holder`); a resume with another key or in another thread is refused. A token is bound
to the agent that issued it: the name of the agent the service runs (a
sub-agent run in-process inside a served run: its own), never the session's processor_id,
which the client writes. And a pause is answered once: each token has an id of its own, and
the run that answers it first claims that id (`AnsweredPauses`); a second resume of the same
pause, however close behind or in parallel, is refused (409) and nothing runs. The answered
ids are kept by the sealer's `answered`: in memory for now (`InMemoryAnsweredPauses`, bounded:
only tokens that verified enter it, each until its token expires, and at most
MAX_ANSWERED_PAUSES), once per process; a store shared by replicas (Redis) can take its place.

The sealer belongs to the service: each app's `Service` builds one from its Settings and its
runs carry it (`Run(..., sealer=)`, and the run's request scope for the runs it starts in
turn). A run outside any app (the in-process facade) seals with this process's random secret.
"""

from __future__ import annotations

import base64
import hashlib
import heapq
import hmac
import json
import re
import secrets
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol

from cryptography.fernet import Fernet, InvalidToken

from sentient_assist.protocol import conventions as names
from sentient_assist.protocol.events import DocumentEvent
from sentient_assist.runtime.errors import PauseRefused as PauseRefused  # raised here, defined with the others
from sentient_assist.runtime.session import Session

DEFAULT_TTL = 86_400.0  # a day to answer
MAX_TOKEN_CHARS = 256 * 1024  # a pause's state (an LLM run's messages) is bounded by the body limit anyway
# Not a setting (yet): the answered pauses one sealer remembers in memory, about 200 bytes each
# (20 MB at the cap). Past it, the one expiring first is forgotten and every token as old is
# refused from then on (InMemoryAnsweredPauses): never a replay, at worst a shorter time to answer.
MAX_ANSWERED_PAUSES = 100_000
_VERSION = 2  # 2: each token has an id (answered once); a token of version 1 has none, and is refused
_TOKEN_FORM = re.compile(r"(?:[A-Za-z0-9_-]{4})+(?:[A-Za-z0-9_-]{2}==|[A-Za-z0-9_-]{3}=)?")

PauseKind = Literal["ask_user", "interrupt"]


ANOTHER_HOLDER = "The pause was made in another thread, or under another key: answer it where it was asked."
ALREADY_ANSWERED = "This pause was already answered: a pause is answered once. Ask again."


def new_pause_id() -> str:
    return secrets.token_urlsafe(16)


@dataclass(frozen=True)
class Pause:
    """What a token says: verified, or about to be signed."""

    kind: PauseKind
    source: str  # the agent that paused: its name, as the service that ran it knows it
    digest: str  # of the conversation's prompts, the paused one last: the conversation it belongs to
    question: str = ""
    state: object = None  # the agent's own, JSON: where to go on from
    id: str = field(default_factory=new_pause_id)  # this pause's own: it is answered once
    holder: str = ""  # who may answer it (`pause_holder`); "": whoever holds the conversation
    issued: float = field(default=0.0, compare=False)  # when it was sealed (verified tokens: the token's time)


@dataclass(frozen=True)
class Resumption:
    """A run resumed: `answer` is the person's reply (the request's prompt) to `pause`;
    `claimed` once this answer has been recorded as the pause's one (`claim()`)."""

    answer: str
    pause: Pause
    claimed: bool = False

    @property
    def state(self) -> Any:
        return self.pause.state


class PauseContext:
    """Where a response pauses, if it does: its agent (by name), session and prompt, for a token
    bound to them, and the sealer of the service that runs it."""

    __slots__ = ("agent", "session", "prompt", "sealer", "holder")

    def __init__(self, session: Session, prompt: str, sealer: PauseSealer, agent: str, holder: str = "") -> None:
        self.agent = agent
        self.session = session
        self.prompt = prompt
        self.sealer = sealer
        self.holder = holder

    def token(self, kind: PauseKind, question: str, state: object) -> str:
        """A token for a pause of this response, sealed by its service's sealer."""
        session, pauses = self.session, self.sealer
        pause = Pause(
            kind=kind,
            source=self.agent,
            digest=prompts_digest([*session.past_prompts(), self.prompt]),
            question=question,
            state=state,
            holder=self.holder,
        )
        return pauses.issue(pause)


def resumption_of(
    session: Session, prompt: str, sealer: PauseSealer, agent: str | None = None, *, holder: str = ""
) -> Resumption | None:
    """The pause this request answers (its history's last turn ended with a pause's token),
    verified by `sealer` for `agent`, the name of the agent the service runs, and for `holder`,
    who answers (`pause_holder`: the key and thread of this request); None when it
    answers none; PauseRefused when the token does not hold. Without `agent`, the session's
    processor_id stands for it: only for a session the service made itself (the OpenAI face's),
    never one a client sent. The pause is not claimed yet: `claim()` does that, before the
    agent runs.

    Of a history kept compact, the last turn's pause and the prompts are read off its records:
    a resume builds no turn, and a token that does not hold costs its check alone."""
    pending = pending_token(session)
    if pending is None:
        return None
    kind, token = pending
    pause = sealer.verify(token, digest=lambda: prompts_digest(session.past_prompts()), holder=holder)
    if pause.kind != kind or pause.source != (session.processor_id if agent is None else agent):
        raise PauseRefused("The pause's token belongs to another agent's pause.")
    return Resumption(answer=prompt, pause=pause)


async def claim(resumption: Resumption, sealer: PauseSealer) -> Resumption:
    """`resumption`, claimed as its pause's one answer in `sealer`'s answered pauses; PauseRefused
    (409) when the pause was answered already. Call it just before the agent goes on."""
    if resumption.claimed:
        return resumption
    pause = resumption.pause
    if not await sealer.answered.claim(pause.id, pause.issued + sealer.ttl):
        raise PauseRefused(ALREADY_ANSWERED, status=409)
    return replace(resumption, claimed=True)


class AnsweredPauses(Protocol):
    """The pauses that have been answered, by id: each is answered once. A pause id enters it
    only from a token that verified, and need be kept only until `expires_at` (a Unix time):
    a token past it no longer verifies. In memory now (InMemoryAnsweredPauses); a store shared
    by the replicas (Redis: SET id NX EXAT expires_at) can take its place."""

    async def claim(self, pause_id: str, expires_at: float) -> bool:
        """True the first time `pause_id` is claimed; False ever after (and whenever this store
        cannot be sure it was not: the pause is then not answered)."""
        ...


class InMemoryAnsweredPauses:
    """Answered pause ids, in this process, each until its token expires, at most `cap` of them.

    What a client can make it hold: only ids of tokens that verified, so of pauses this service
    issued within the TTL; that is still whatever a client can make the agent pause, so it is
    capped too. At the cap, the id expiring first is forgotten, and `floor` rises to its expiry:
    a token expiring no later is refused from then on, whether it was answered or not, so a
    forgotten id can never be answered again. A flood of pauses shortens the time to answer,
    and never lets a pause be answered twice."""

    __slots__ = ("cap", "_clock", "_expiry", "_by_expiry", "_floor", "_lock")

    def __init__(self, cap: int = MAX_ANSWERED_PAUSES, *, clock: Callable[[], float] = time.time) -> None:
        self.cap = cap
        self._clock = clock
        self._expiry: dict[str, float] = {}
        self._by_expiry: list[tuple[float, str]] = []  # a heap: the first to expire on top
        self._floor = float("-inf")
        self._lock = threading.Lock()  # the in-process facade's default store may serve several threads' loops

    def __len__(self) -> int:
        return len(self._expiry)

    async def claim(self, pause_id: str, expires_at: float) -> bool:
        # No await inside: in one event loop, the first of any number of parallel claims wins.
        with self._lock:
            now = self._clock()
            expiry, by_expiry = self._expiry, self._by_expiry
            while by_expiry and by_expiry[0][0] <= now:
                del expiry[heapq.heappop(by_expiry)[1]]
            if pause_id in expiry or expires_at <= now or expires_at <= self._floor:
                return False
            if len(expiry) >= self.cap:
                forgotten, oldest = heapq.heappop(by_expiry)
                del expiry[oldest]
                self._floor = max(self._floor, forgotten)
                if expires_at <= self._floor:
                    return False
            expiry[pause_id] = expires_at
            heapq.heappush(by_expiry, (expires_at, pause_id))
            return True


class PauseSealer:
    """Seals pauses into tokens and opens them, with one secret: Fernet (AES-128 and
    HMAC-SHA256, from `cryptography`), so that a client can neither change a pause nor read
    it (an LLM run's messages hold what the model was told and the user was not). `answered`
    records the pauses answered with its tokens (each once); its own, in memory, unless given."""

    def __init__(self, secret: bytes, *, ttl: float = DEFAULT_TTL, answered: AnsweredPauses | None = None) -> None:
        if len(secret) < 16:
            raise ValueError("the resume secret must be at least 16 bytes")
        self._fernet = Fernet(base64.urlsafe_b64encode(hashlib.sha256(b"assist pause\0" + secret).digest()))
        self.ttl = ttl
        self.answered: AnsweredPauses = answered if answered is not None else InMemoryAnsweredPauses()

    def issue(self, pause: Pause) -> str:
        data = {
            "v": _VERSION,
            "id": pause.id,
            "kind": pause.kind,
            "source": pause.source,
            "digest": pause.digest,
            "question": pause.question,
            "state": pause.state,
        }
        if pause.holder:
            data["holder"] = pause.holder
        return self._fernet.encrypt(json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode()).decode()

    def verify(
        self, token: str, *, digest: str | Callable[[], str], holder: str = "", now: float | None = None
    ) -> Pause:
        """The pause `token` holds, if this service sealed it for this conversation (`digest`,
        or what it makes: asked for only of a token this service sealed) and this `holder`,
        and it has not expired; PauseRefused otherwise."""
        # Only the exact spelling a token is issued in: base64 decoding forgives stray characters.
        if not isinstance(token, str) or len(token) > MAX_TOKEN_CHARS or not _TOKEN_FORM.fullmatch(token):
            raise PauseRefused("The pause's token is not one this service issues.")
        try:
            sealed = self._fernet.decrypt(token)
            issued = self._fernet.extract_timestamp(token)
        except (InvalidToken, ValueError):
            raise PauseRefused("The pause's token was not issued by this service, or was changed.") from None
        try:
            data = json.loads(sealed)
            if data["v"] != _VERSION or not isinstance(data["id"], str) or not data["id"]:
                raise ValueError("a token of another version")  # one of version 1 has no id: it cannot be answered once
            pause = Pause(
                kind=data["kind"],
                source=data["source"],
                digest=data["digest"],
                question=data.get("question", ""),
                state=data.get("state"),
                id=data["id"],
                issued=float(issued),
                holder=data.get("holder", ""),
            )
        except (ValueError, KeyError, TypeError):
            raise PauseRefused("The pause's token is not one this service issues.") from None
        if not hmac.compare_digest(pause.digest, digest if isinstance(digest, str) else digest()):
            raise PauseRefused("The pause's token belongs to another conversation.")
        if not isinstance(pause.holder, str) or not hmac.compare_digest(pause.holder, holder):
            raise PauseRefused(ANOTHER_HOLDER)
        if (time.time() if now is None else now) > issued + self.ttl:
            raise PauseRefused("The pause has expired: ask again.")
        return pause


def pause_holder(caller: str, thread: str | None = None) -> str:
    """Who may answer a pause a run makes: its `caller` (a digest of its key, "" without keys)
    in its `thread` (None without one), as one short digest; "" when neither is known."""
    if not caller and not thread:
        return ""
    named = caller.encode() + b"\0" + (thread or "").encode("utf-8", "surrogatepass")
    return _b64(hashlib.sha256(b"assist holder\0" + named).digest()[:16])


def prompts_digest(prompts: Iterable[str]) -> str:
    """A digest of a conversation's prompts, in order: a pause is bound to its conversation."""
    digest = hashlib.sha256()
    for prompt in prompts:
        encoded = prompt.encode("utf-8", "surrogatepass")
        digest.update(len(encoded).to_bytes(8, "big") + encoded)
    return _b64(digest.digest())


# The event that carries a pause of each kind, and its token; and the kind of each such event.
PAUSE_EVENT_NAMES: dict[PauseKind, str] = {"ask_user": names.ASK_USER, "interrupt": names.INTERRUPT}
PAUSE_KINDS: dict[str, PauseKind] = {name: kind for kind, name in PAUSE_EVENT_NAMES.items()}


def pending_token(session: Session) -> tuple[PauseKind, str] | None:
    """The token of the pause that ended the conversation's last turn, if it ended with one:
    its last ASK_USER or INTERRUPT event's, when that holds a token."""
    history = session.compact_history()
    if history is not None:
        pause = history.last_pause()
        return None if pause is None else (PAUSE_KINDS[pause[0]], pause[1])
    interactions = session.get_interactions()
    if not interactions:
        return None
    for response in reversed(interactions[-1].responses):
        event = response.event
        if isinstance(event, DocumentEvent) and event.event_name in PAUSE_KINDS:
            token = event.content.get("token")
            return (PAUSE_KINDS[event.event_name], token) if isinstance(token, str) and token else None
    return None


def sealer_for(secret: bytes | None, ttl: float = DEFAULT_TTL, answered: AnsweredPauses | None = None) -> PauseSealer:
    """A service's sealer, from its ASSIST_RESUME_SECRET and ASSIST_RESUME_TTL; without a secret,
    this process's random one (pauses then resume only in the process that made them: set the
    secret when there are several workers or replicas, or across restarts). Its answered pauses
    are `answered`, else its own in memory: a service's, as its sealer is."""
    return PauseSealer(secret if secret is not None else _PROCESS_SECRET, ttl=ttl, answered=answered)


# Not a setting: the secret of services that set none, and of runs outside any app; the
# process-wide answered pauses of those runs (the in-process facade's) are PROCESS_SEALER's.
_PROCESS_SECRET = secrets.token_bytes(32)
PROCESS_SEALER = PauseSealer(_PROCESS_SECRET)


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()
