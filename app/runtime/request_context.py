"""The id of the request a run answers, for code that runs inside the agent's task.

`Run` starts the agent's task in a context where `current_request_id()` is the run's
`RunStats.request_id` (the server's: the caller's X-Request-ID, or a fresh ULID). Code deep in
an agent (a model's error details, a log line) reads it there, without it being passed along.
"""

from __future__ import annotations

import contextvars

_request_id: contextvars.ContextVar[str | None] = contextvars.ContextVar("request_id", default=None)


def current_request_id() -> str | None:
    """The id of the request whose run this code is part of; None outside a run."""
    return _request_id.get()


def context_for_request(request_id: str) -> contextvars.Context:
    """A copy of the current context in which `current_request_id()` is `request_id`: for the
    agent's task (`asyncio.create_task(..., context=...)`), so the id stays with that task."""
    context = contextvars.copy_context()
    context.run(_request_id.set, request_id)
    return context
