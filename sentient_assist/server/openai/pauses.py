"""How a paused run's token travels through an OpenAI client: inside the assistant's message.

A chat front end (Open WebUI, LibreChat, the openai SDK's users) keeps an assistant
message's `content` and sends it back with the next turn, and nothing else of the answer.
So the pause's token rides at the end of the content as a Markdown link reference
definition, which every CommonMark renderer shows as nothing:

    [//]: # (sentient-pause:ask_user:gAAAAAB...)

The token is sealed (sentient_assist/runtime/pauses.py): a client can neither read nor change it.
Reading the history back, the marker is taken out of the text and becomes the ASK_USER (or
INTERRUPT) event that `resumption_of()` looks for in the last turn.

The content is the client's, up to the whole body in one message: it is read in linear
time (a search for the marker's fixed opening, then a bounded match anchored there), never
by a pattern that a run of newlines or of half-markers could make quadratic.
"""

from __future__ import annotations

import re

from sentient_assist.runtime.pauses import MAX_TOKEN_CHARS, PauseKind

# A Fernet token is URL-safe base64; parentheses, spaces and newlines cannot occur in one.
_TOKEN = re.compile(r"[A-Za-z0-9_=-]+")
_OPENING = "[//]: # (sentient-pause:"
# What follows the opening, matched only where an opening was found. Possessive: a token
# longer than any issued fails at once, without trying every shorter length.
_REST = re.compile(rf"(ask_user|interrupt):([A-Za-z0-9_=-]{{1,{MAX_TOKEN_CHARS}}}+)\)\n?")


def is_token(token: str) -> bool:
    """Whether `token` can ride in a marker (a sealed token always can)."""
    return len(token) <= MAX_TOKEN_CHARS and _TOKEN.fullmatch(token) is not None


def marker(kind: PauseKind, token: str) -> str:
    """The line that carries a pause's token; after a blank line, as a definition must be."""
    return f"\n\n{_OPENING}{kind}:{token})\n"


def take_marker(content: str) -> tuple[str, tuple[PauseKind, str] | None]:
    """The content without its pause markers (each with the newlines before it), and the
    last marker's kind and token, if any."""
    start = content.find(_OPENING)
    if start < 0:
        return content, None  # nearly every message: one scan, nothing copied
    kept: list[str] = []
    kept_from = 0
    last: re.Match[str] | None = None
    while start >= 0:
        found = _REST.match(content, start + len(_OPENING))
        if found is None:  # not a marker (no kind, no token, too long, unclosed): text
            start = content.find(_OPENING, start + len(_OPENING))
            continue
        before = content[kept_from:start]
        kept.append(before.rstrip("\n"))  # each stretch of the content is looked at once
        kept_from = found.end()
        last = found
        start = content.find(_OPENING, kept_from)
    if last is None:
        return content, None
    kept.append(content[kept_from:])
    kind: PauseKind = "ask_user" if last.group(1) == "ask_user" else "interrupt"
    return "".join(kept), (kind, last.group(2))
