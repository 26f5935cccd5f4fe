"""What a provider's error text may not carry into a log: keys, and the text we sent the model.

    mask_secrets("Incorrect API key provided: sk-test***-key.")  ->  "Incorrect API key provided: sk-***."
    mask_sent_text("Invalid content: 'Tell me about my tax return'", ["Tell me about my tax return"])
        ->  "Invalid content: '[sent text]'"

`masked_excerpt` does both to the start of a text, for one field of a log line. Nothing here is
sent to a client: a client is told only a message of ours (sentient_assist/llm/openai_model.py).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable

MASK = "***"
SENT_TEXT_MASK = "[sent text]"
MIN_KNOWN_SECRET = 8  # a shorter configured "key" (a local server's "x") is no secret, and would mangle the text
MIN_SENT_RUN = 12  # shorter runs shared with the prompt are too often just common words
_MIN_TOKEN = 16  # letters and digits, mixed: from this length on a run looks like a key
_LAST_WORD = re.compile(r"\S*$")

_SECRET_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    # "Bearer abc…", "Basic abc…": an Authorization header's credentials
    (re.compile(r"\b(Bearer|Basic)\s+[A-Za-z0-9\-._~+/=*]+", re.IGNORECASE), rf"\1 {MASK}"),
    # api_key=…, "token": "…", password: …: a named secret's value, however short
    (
        re.compile(
            r"\b((?:api[-_]?key|access[-_]?token|token|secret|password|authorization)[\"']?\s*[:=]\s*[\"']?)"
            r"[^\s\"'&,;]+",
            re.IGNORECASE,
        ),
        rf"\1{MASK}",
    ),
    # provider keys by their prefix, which is kept: sk-… (OpenAI, Anthropic, OpenRouter), gsk_ (Groq), hf_, …
    (re.compile(r"(?<![A-Za-z0-9])(sk|pk|rk|gsk|xai|hf|fw|pplx|nvapi|r8)([-_])[A-Za-z0-9\-_*]{3,}"), rf"\1\2{MASK}"),
    # anything long and random-looking: 16+ letters and digits, mixed (base64, hex, JWT parts)
    (
        re.compile(rf"(?<![A-Za-z0-9+=])(?=[A-Za-z0-9+=]*\d)(?=[A-Za-z0-9+=]*[A-Za-z])[A-Za-z0-9+=]{{{_MIN_TOKEN},}}"),
        MASK,
    ),
)


def mask_secrets(text: str, known: Iterable[str] = ()) -> str:
    """`text` with anything that looks like a credential replaced by `***`: each of `known` (the
    configured key) wherever it appears; `Bearer …`/`Basic …`; the value of `api_key=`, `token:`,
    `password=` and the like; prefixed provider keys (`sk-…`, `gsk_…`, …: the prefix is kept); and
    any run of 16 or more letters and digits that has both (base64 or hex tokens, JWT parts)."""
    for secret in known:
        if len(secret) >= MIN_KNOWN_SECRET:
            text = text.replace(secret, MASK)
    for pattern, replacement in _SECRET_PATTERNS:
        text = pattern.sub(replacement, text)
    return text


def mask_sent_text(text: str, sent: Iterable[str], *, min_run: int = MIN_SENT_RUN) -> str:
    """`text` with every run of `min_run` or more characters that also occurs in one of `sent` (as
    is, or escaped as JSON or Python would quote it) replaced by `[sent text]`: a provider's error
    that quotes the prompt, or echoes the request, keeps its own words and loses ours."""
    if len(text) < min_run:
        return text
    # Only the short text's pieces are kept; the sent text, possibly long, is scanned, not stored.
    starts: dict[str, list[int]] = {}
    for start in range(len(text) - min_run + 1):
        starts.setdefault(text[start : start + min_run], []).append(start)
    covered = bytearray(len(text))
    for form in _forms(sent):
        for offset in range(len(form) - min_run + 1):
            found = starts.pop(form[offset : offset + min_run], None)
            for start in found or ():
                covered[start : start + min_run] = b"\x01" * min_run
            if not starts:
                break
    pieces: list[str] = []
    kept_from = 0
    for run in re.finditer(b"\x01+", covered):
        pieces += [text[kept_from : run.start()], SENT_TEXT_MASK]
        kept_from = run.end()
    return "".join(pieces) + text[kept_from:]


def masked_excerpt(text: str, *, known: Iterable[str] = (), sent: Iterable[str] = (), limit: int = 300) -> str:
    """At most `limit` characters of `text` for a log, keys (`mask_secrets`) and text we sent
    (`mask_sent_text`) masked. Only the start of a long text is read, up to its last whole word:
    a key cut in two there could be too short to look like one."""
    window = text[: limit * 2]
    if len(window) < len(text):
        window = _LAST_WORD.sub("", window) + "…"
    masked = mask_sent_text(mask_secrets(window, known), sent)
    return masked if len(masked) <= limit else masked[: limit - 1] + "…"


def _forms(sent: Iterable[str]) -> set[str]:
    """Each sent text as is, and as a provider echoing the request would show it."""
    forms: set[str] = set()
    for text in sent:
        forms.update((text, json.dumps(text)[1:-1], json.dumps(text, ensure_ascii=False)[1:-1], repr(text)[1:-1]))
    return forms
