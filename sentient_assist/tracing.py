"""Where a run finds its tracing: None (the default, and all there is when tracing is off), or
the Tracing of the app whose request it serves (sentient_assist/runtime/tracing.py).

No OpenTelemetry import here: an app whose tracing is off never loads it. The app's tracing
middleware (sentient_assist/server/tracing.py), added only when tracing is on, sets it for each
request; a run, a model call, a tool call read it once each, never per event or token.
"""

from __future__ import annotations

import contextvars
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sentient_assist.runtime.tracing import Tracing

_tracing: contextvars.ContextVar[Tracing | None] = contextvars.ContextVar("sentient_assist_tracing", default=None)

current_tracing = _tracing.get


def set_tracing(tracing: Tracing | None) -> contextvars.Token[Tracing | None]:
    return _tracing.set(tracing)


def reset_tracing(token: contextvars.Token[Tracing | None]) -> None:
    _tracing.reset(token)
