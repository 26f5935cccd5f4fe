"""How a paused run's token travels through an OpenAI client: inside the assistant's message.

A chat front end (Open WebUI, LibreChat, the openai SDK's users) keeps an assistant
message's `content` and sends it back with the next turn, and nothing else of the answer.
So the pause's token rides at the end of the content as a Markdown link reference
definition, which every CommonMark renderer shows as nothing:

    [//]: # (sentient-pause:ask_user:gAAAAAB...)

The token is sealed (app/runtime/pauses.py): a client can neither read nor change it.
Reading the history back, the marker is taken out of the text and becomes the ASK_USER (or
INTERRUPT) event that `resumption_of()` looks for in the last turn.
"""

from __future__ import annotations

import re

from app.protocol import conventions as names
from app.runtime.pauses import PauseKind

EVENT_NAMES: dict[PauseKind, str] = {"ask_user": names.ASK_USER, "interrupt": names.INTERRUPT}
# A Fernet token is URL-safe base64; parentheses, spaces and newlines cannot occur in one.
_TOKEN = re.compile(r"[A-Za-z0-9_=-]+")
_MARKER = re.compile(r"\n*\[//\]: # \(sentient-pause:(ask_user|interrupt):([A-Za-z0-9_=-]+)\)\n?")


def is_token(token: str) -> bool:
    """Whether `token` can ride in a marker (a sealed token always can)."""
    return _TOKEN.fullmatch(token) is not None


def marker(kind: PauseKind, token: str) -> str:
    """The line that carries a pause's token; after a blank line, as a definition must be."""
    return f"\n\n[//]: # (sentient-pause:{kind}:{token})\n"


def take_marker(content: str) -> tuple[str, tuple[PauseKind, str] | None]:
    """The content without its pause markers, and the last marker's kind and token, if any."""
    found = _MARKER.findall(content)
    if not found:
        return content, None
    word, token = found[-1]
    kind: PauseKind = "ask_user" if word == "ask_user" else "interrupt"
    return _MARKER.sub("", content), (kind, token)
