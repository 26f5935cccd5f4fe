"""The request a run answers, for code that runs inside the agent's task.

`Run` starts the agent's task in a context holding the run's `RequestScope`:
`current_request_id()` is the run's `RunStats.request_id` (the server's: the caller's
X-Request-ID, or a fresh ULID), `current_agent()` the name of the agent it runs, and
`current_question()` its prompt and session, `current_sealer()` the pause sealer of the
service it runs in (sentient_assist/runtime/pauses.py). Code deep in an agent (a model's error details,
a log line, the guards of agent-to-agent calls, the context signals) reads them there,
without them being passed along. One context variable for all of them: each one a run sets
costs every open stream its share of the context's storage.
"""

from __future__ import annotations

import contextvars
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sentient_assist.runtime.pauses import PauseSealer
    from sentient_assist.runtime.session import Session


class RequestScope:
    __slots__ = ("request_id", "agent", "prompt", "session", "sealer")

    def __init__(
        self,
        request_id: str,
        agent: str | None,
        prompt: str | None,
        session: Session | None,
        sealer: PauseSealer | None = None,
    ) -> None:
        self.request_id = request_id
        self.agent = agent
        self.prompt = prompt
        self.session = session
        self.sealer = sealer


_scope: contextvars.ContextVar[RequestScope | None] = contextvars.ContextVar("request_scope", default=None)


def current_request_id() -> str | None:
    """The id of the request whose run this code is part of; None outside a run."""
    scope = _scope.get()
    return scope.request_id if scope is not None else None


def current_agent() -> str | None:
    """The name of the agent whose run this code is part of; None outside a run."""
    scope = _scope.get()
    return scope.agent if scope is not None else None


def current_question() -> tuple[str, Session] | None:
    """The prompt and the session of the run this code is part of; None outside a run."""
    scope = _scope.get()
    if scope is None or scope.prompt is None or scope.session is None:
        return None
    return scope.prompt, scope.session


def current_sealer() -> PauseSealer | None:
    """The pause sealer of the service whose run this code is part of: a run started inside it
    (an in-process sub-agent) seals and verifies with it too; None outside a run."""
    scope = _scope.get()
    return scope.sealer if scope is not None else None


def context_for_request(
    request_id: str,
    agent: str | None = None,
    prompt: str | None = None,
    session: Session | None = None,
    sealer: PauseSealer | None = None,
) -> contextvars.Context:
    """A copy of the current context holding this run's scope: for the agent's task
    (`asyncio.create_task(..., context=...)`), so that it stays with that task."""
    context = contextvars.copy_context()
    context.run(_scope.set, RequestScope(request_id, agent, prompt, session, sealer))
    return context
