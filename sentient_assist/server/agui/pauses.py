"""How a paused run's token travels through an AG-UI client: as the id of its interrupt.

An AG-UI client resumes an interrupt by sending, with the next run, a resume entry that names
the interrupt by its id (`resume: [{interruptId, status, payload}]`), and keeps nothing else
of it. So the id is the pause's kind and its sealed token (sentient_assist/runtime/pauses.py):
`ask_user:<token>` or `interrupt:<token>`. A client can neither read nor change a token. A call
of a client's own tool carries the same string as the call's encrypted value, which an AG-UI
client keeps on the call and sends back with its messages.
"""

from __future__ import annotations

from typing import Any

from sentient_assist.protocol.events import dumps_json
from sentient_assist.runtime.pauses import MAX_TOKEN_CHARS, PauseKind

KINDS: dict[str, PauseKind] = {"ask_user": "ask_user", "interrupt": "interrupt"}
# What a yes-or-no answer is to the agent: an LLMAgent approves a call on "yes" (llm/asking.py).
APPROVED, REFUSED = "yes", "no"


def interrupt_id(kind: PauseKind, token: str) -> str:
    return f"{kind}:{token}"


def pause_of(interrupt_id: str) -> tuple[PauseKind, str] | None:
    """The kind and token an interrupt's id carries; None when it carries none."""
    kind, colon, token = interrupt_id.partition(":")
    if not colon or kind not in KINDS or not token or len(token) > MAX_TOKEN_CHARS:
        return None
    return KINDS[kind], token


def answer_text(payload: Any, *, cancelled: bool) -> str:
    """A resume entry's payload as the agent reads an answer: text as it is; true or false, or an
    object saying `approved`, as yes or no; `answer` or `text` of an object; any other value as
    JSON. A cancelled interrupt is a no."""
    if cancelled:
        return REFUSED
    if isinstance(payload, str):
        return payload
    if isinstance(payload, bool):
        return APPROVED if payload else REFUSED
    if isinstance(payload, dict):
        approved = payload.get("approved")
        if isinstance(approved, bool):
            return APPROVED if approved else REFUSED
        for key in ("answer", "text", "value"):
            if isinstance(payload.get(key), str):
                return str(payload[key])
    if payload is None:
        return ""
    return dumps_json(payload)
