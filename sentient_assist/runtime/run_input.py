"""RunInput: what one run takes beyond the 0.3.0 call `assist(session, query, response_handler)`,
as one typed value. The face that parsed the request builds it; the run hands it to the agent as
`response_handler.run_input`. Nothing of it is written on the user's `Session`, set in a context
variable or given to a copy of the agent.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sentient_assist.runtime.pauses import Resumption


@dataclass(frozen=True, slots=True)
class OfferedTool:
    """A tool a client offered for this run (AG-UI's front-end tool): its call is the client's to
    make, so the run stops there and the client answers with the call's result in its next run."""

    name: str
    description: str
    parameters_json: str = "{}"
    """Its JSON Schema, as the client gave it, kept as compact JSON text: a client's schema held
    as Python objects takes about twenty times its size for the whole run."""

    @property
    def parameters(self) -> Mapping[str, object]:
        """Its JSON Schema, decoded (a new copy at each read)."""
        decoded = json.loads(self.parameters_json)
        return decoded if isinstance(decoded, dict) else {}


@dataclass(frozen=True, slots=True)
class ToolAnswer:
    """A client's answer to a call of one of its tools: its result (text), or its error."""

    result: str | None = None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class ContextItem:
    """One thing the application tells the agent about (AG-UI's `context`)."""

    description: str
    value: str


_NO_ANSWERS: Mapping[str, ToolAnswer] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class RunInput:
    """The run's own input besides the session and the query.

    A run with nothing more (a plain /assist request) has `RunInput()`: every field empty.
    """

    resumed: Resumption | None = None
    """The pause this request answers, its token checked (claimed already when the face refused a
    second answer before the run); None: the run resumes nothing, or the run finds it itself from
    the session's history (/assist's own way)."""
    offered_tools: tuple[OfferedTool, ...] = ()
    """Tools the client offered (AG-UI): an LLMAgent gives its model these as well, for this run."""
    tool_answers: Mapping[str, ToolAnswer] = field(default_factory=lambda: _NO_ANSWERS)
    """The client's answers to calls of its tools, by call id: what the resumed run's calls came to."""
    context: tuple[ContextItem, ...] = ()
    """What the application tells the agent (AG-UI's `context`)."""
    state_json: str = ""
    """The application's state (AG-UI's `state`) as compact JSON text; "": none given. Kept as
    text for the run, as the histories are: `[{},{},...]` from a 1 MB request takes 1 MB so,
    and about 24 MB as Python objects."""
    forwarded_props_json: str = ""
    """What the client passed through for the agent (AG-UI's `forwardedProps`), as compact JSON
    text; "": none."""
    thread: str | None = None
    """The conversation the run belongs to, as the client names it (AG-UI's `threadId`, A2A's
    `contextId`): a pause the run makes is answered in this thread only."""
    caller: str = ""
    """Whose run it is: a digest of the client's key ("" without keys). A pause the run makes is
    answered with this key only."""

    @property
    def state(self) -> object:
        """The application's state, decoded (a new copy at each read); None: none given."""
        return json.loads(self.state_json) if self.state_json else None

    @property
    def forwarded_props(self) -> object:
        """What the client passed through for the agent, decoded (a new copy at each read)."""
        return json.loads(self.forwarded_props_json) if self.forwarded_props_json else None

    def told(self) -> str:
        """The context and the state, as a model reads them (an LLMAgent adds it to its instructions);
        empty when there are none."""
        said: list[str] = []
        if self.context:
            lines = "\n".join(f"- {item.description}: {item.value}" for item in self.context)
            said.append(f"Context from the application:\n{lines}")
        if self.state_json not in ("", "null", "{}", "[]"):
            said.append(f"The application's state (JSON): {self.state_json}")
        return "\n\n".join(said)


NO_RUN_INPUT = RunInput()
