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

The sealer belongs to the service: each app's `Assist` builds one from its Settings and its
runs carry it (`Run(..., sealer=)`, and the run's request scope for the runs it starts in
turn). A run outside any app (the in-process facade) seals with this process's random secret.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import secrets
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from cryptography.fernet import Fernet, InvalidToken

from sentient_assist.protocol import conventions as names
from sentient_assist.protocol.events import DocumentEvent
from sentient_assist.protocol.request import Interaction
from sentient_assist.runtime.session import Session

DEFAULT_TTL = 86_400.0  # a day to answer
MAX_TOKEN_CHARS = 256 * 1024  # a pause's state (an LLM run's messages) is bounded by the body limit anyway
_VERSION = 1
_TOKEN_FORM = re.compile(r"(?:[A-Za-z0-9_-]{4})+(?:[A-Za-z0-9_-]{2}==|[A-Za-z0-9_-]{3}=)?")

PauseKind = Literal["ask_user", "interrupt"]


class PauseRefused(Exception):
    """A resume whose token this service cannot honour; the message says why, for the client."""


@dataclass(frozen=True)
class Pause:
    """What a token says: verified, or about to be signed."""

    kind: PauseKind
    source: str  # the agent that paused
    digest: str  # of the conversation's prompts, the paused one last: the conversation it belongs to
    question: str = ""
    state: Any = None  # the agent's own, JSON: where to go on from


@dataclass(frozen=True)
class Resumption:
    """A run resumed: `answer` is the person's reply (the request's prompt) to `pause`."""

    answer: str
    pause: Pause

    @property
    def state(self) -> Any:
        return self.pause.state


class PauseContext:
    """Where a response pauses, if it does: its session and prompt, for a token bound to them,
    and the sealer of the service that runs it."""

    __slots__ = ("session", "prompt", "sealer")

    def __init__(self, session: Session, prompt: str, sealer: PauseSealer) -> None:
        self.session = session
        self.prompt = prompt
        self.sealer = sealer

    def token(self, kind: PauseKind, question: str, state: Any) -> str:
        """A token for a pause of this response, sealed by its service's sealer."""
        session, pauses = self.session, self.sealer
        prompts = [*(i.request.event.prompt for i in session.get_interactions()), self.prompt]
        pause = Pause(
            kind=kind,
            source=session.processor_id,
            digest=prompts_digest(prompts),
            question=question,
            state=state,
        )
        return pauses.issue(pause)


def resumption_of(session: Session, prompt: str, sealer: PauseSealer) -> Resumption | None:
    """The pause this request answers (its history's last turn ended with a pause's token),
    verified by `sealer`; None when it answers none; PauseRefused when the token does not hold."""
    interactions = session.get_interactions()
    pending = pending_token(interactions)
    if pending is None:
        return None
    kind, token = pending
    digest = prompts_digest(i.request.event.prompt for i in interactions)
    pause = sealer.verify(token, digest=digest)
    if pause.kind != kind or pause.source != session.processor_id:
        raise PauseRefused("The pause's token belongs to another agent's pause.")
    return Resumption(answer=prompt, pause=pause)


class PauseSealer:
    """Seals pauses into tokens and opens them, with one secret: Fernet (AES-128 and
    HMAC-SHA256, from `cryptography`), so that a client can neither change a pause nor read
    it (an LLM run's messages hold what the model was told and the user was not)."""

    def __init__(self, secret: bytes, *, ttl: float = DEFAULT_TTL) -> None:
        if len(secret) < 16:
            raise ValueError("the resume secret must be at least 16 bytes")
        self._fernet = Fernet(base64.urlsafe_b64encode(hashlib.sha256(b"assist pause\0" + secret).digest()))
        self.ttl = ttl

    def issue(self, pause: Pause) -> str:
        data = {"v": _VERSION, **pause.__dict__}
        return self._fernet.encrypt(json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode()).decode()

    def verify(self, token: str, *, digest: str, now: float | None = None) -> Pause:
        """The pause `token` holds, if this service sealed it for this conversation and it
        has not expired; PauseRefused otherwise."""
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
            pause = Pause(
                kind=data["kind"],
                source=data["source"],
                digest=data["digest"],
                question=data.get("question", ""),
                state=data.get("state"),
            )
        except (ValueError, KeyError, TypeError):
            raise PauseRefused("The pause's token is not one this service issues.") from None
        if not hmac.compare_digest(pause.digest, digest):
            raise PauseRefused("The pause's token belongs to another conversation.")
        if (time.time() if now is None else now) > issued + self.ttl:
            raise PauseRefused("The pause has expired: ask again.")
        return pause


def prompts_digest(prompts: Iterable[str]) -> str:
    """A digest of a conversation's prompts, in order: a pause is bound to its conversation."""
    digest = hashlib.sha256()
    for prompt in prompts:
        encoded = prompt.encode("utf-8", "surrogatepass")
        digest.update(len(encoded).to_bytes(8, "big") + encoded)
    return _b64(digest.digest())


def pending_token(interactions: list[Interaction]) -> tuple[PauseKind, str] | None:
    """The token of the pause that ended the conversation's last turn, if it ended with one."""
    if not interactions:
        return None
    kinds: dict[str, PauseKind] = {names.ASK_USER: "ask_user", names.INTERRUPT: "interrupt"}
    for response in reversed(interactions[-1].responses):
        event = response.event
        if isinstance(event, DocumentEvent) and event.event_name in kinds:
            token = event.content.get("token")
            return (kinds[event.event_name], token) if isinstance(token, str) and token else None
    return None


def sealer_for(secret: bytes | None, ttl: float = DEFAULT_TTL) -> PauseSealer:
    """A service's sealer, from its ASSIST_RESUME_SECRET and ASSIST_RESUME_TTL; without a secret,
    this process's random one (pauses then resume only in the process that made them: set the
    secret when there are several workers or replicas, or across restarts)."""
    return PauseSealer(secret if secret is not None else _PROCESS_SECRET, ttl=ttl)


# Not a setting: the secret of services that set none, and of runs outside any app.
_PROCESS_SECRET = secrets.token_bytes(32)
PROCESS_SEALER = PauseSealer(_PROCESS_SECRET)


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()
