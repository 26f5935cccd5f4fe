"""The base class every agent extends."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING

from pydantic import BaseModel

from sentient_assist.protocol.request import MAX_NAME_LENGTH
from sentient_assist.runtime.errors import AgentError

if TYPE_CHECKING:
    from sentient_assist.protocol.request import Query
    from sentient_assist.runtime.response_handler import ResponseHandler
    from sentient_assist.runtime.session import Session


class Identity(BaseModel):
    """An agent's id (sent as each event's `source`) and its display name."""

    id: str
    name: str

    def __str__(self) -> str:
        return f"{self.id}:{self.name}"


class AbstractAgent(ABC):
    """An agent: a name, and `assist()` that answers one query through a ResponseHandler.

    Set the class attributes `name` and `description` and the registry can
    build the agent with no arguments; `AbstractAgent(name)` works as in 0.3.0.
    """

    name: str = ""
    description: str = ""

    def __init__(self, name: str | None = None) -> None:
        if name is not None:
            self.name = name
        elif not self.name:
            self.name = type(self).__name__
        if len(self.name) > MAX_NAME_LENGTH:
            # It is every event's `source`, and a session's processor_id: the wire's limit for those.
            raise AgentError(f"an agent's name is at most {MAX_NAME_LENGTH} characters, got {len(self.name)}")

    @abstractmethod
    async def assist(self, session: Session, query: Query, response_handler: ResponseHandler) -> None:
        """Answer `query`, emitting events through `response_handler`."""

    async def aclose(self) -> None:
        """Let go of what the agent holds open between runs (its MCP servers' sessions, say): the
        service that serves it calls this when it shuts down. The default holds nothing."""
        return None  # an optional hook, not abstract: most hold nothing
