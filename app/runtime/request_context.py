"""The request a run answers, for code that runs inside the agent's task.

`Run` starts the agent's task in a context where `current_request_id()` is the run's
`RunStats.request_id` (the server's: the caller's X-Request-ID, or a fresh ULID), and
`current_agent()` the name of the agent it runs. Code deep in an agent (a model's error
details, a log line, the guards of agent-to-agent calls) reads them there, without them
being passed along.
"""

from __future__ import annotations

import contextvars
from typing import Any

_request_id: contextvars.ContextVar[str | None] = contextvars.ContextVar("request_id", default=None)
_agent: contextvars.ContextVar[str | None] = contextvars.ContextVar("agent", default=None)
_asked: contextvars.ContextVar[tuple[str, Any] | None] = contextvars.ContextVar("asked", default=None)


def current_request_id() -> str | None:
    """The id of the request whose run this code is part of; None outside a run."""
    return _request_id.get()


def current_agent() -> str | None:
    """The name of the agent whose run this code is part of; None outside a run."""
    return _agent.get()


def current_question() -> tuple[str, Any] | None:
    """The prompt and the session of the run this code is part of; None outside a run."""
    return _asked.get()


def context_for_request(
    request_id: str, agent: str | None = None, question: tuple[str, Any] | None = None
) -> contextvars.Context:
    """A copy of the current context in which `current_request_id()` is `request_id`,
    `current_agent()` is `agent` and `current_question()` is `question` (prompt, session):
    for the agent's task (`asyncio.create_task(..., context=...)`), so they stay with it."""
    context = contextvars.copy_context()
    context.run(_request_id.set, request_id)
    context.run(_agent.set, agent)
    context.run(_asked.set, question)
    return context
