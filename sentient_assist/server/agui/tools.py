"""What an LLMAgent is given of an AG-UI input: the client's tools, checked here and offered to
the run in its `RunInput` (sentient_assist/llm/client_tools.py makes them the model's tools for
that run); the context and the state go in the same RunInput, told to the model after the
agent's own instructions. The agent itself is served as it is.
"""

from __future__ import annotations

from ag_ui.core import RunAgentInput

from sentient_assist.llm.agent import LLMAgent
from sentient_assist.llm.asking import ASK_TOOL
from sentient_assist.llm.output import OUTPUT_TOOL
from sentient_assist.runtime.agent import AbstractAgent
from sentient_assist.runtime.errors import InputError
from sentient_assist.runtime.run_input import OfferedTool
from sentient_assist.server.json_shape import compact_json

MAX_TOOLS = 128  # a model takes about as many (OpenAI's API: 128)


def offered_tools(agent: AbstractAgent, body: RunAgentInput) -> tuple[OfferedTool, ...]:
    """The tools the input offers, as the run takes them; InputError naming one that cannot be
    a tool of `agent`'s model (empty, reserved, or one of its own)."""
    offered = body.tools or []
    if len(offered) > MAX_TOOLS:
        raise InputError("tools", f"at most {MAX_TOOLS} tools")
    own = agent.tools if isinstance(agent, LLMAgent) else {}
    reserved = {ASK_TOOL, OUTPUT_TOOL}
    names: set[str] = set()
    tools: list[OfferedTool] = []
    for index, tool in enumerate(offered):
        if not tool.name or tool.name in reserved or tool.name in own or tool.name in names:
            # The name is not repeated: it is the client's, of any length.
            raise InputError(
                f"tools[{index}].name", "empty, or the name of another tool of this agent (or of the input)"
            )
        if tool.parameters is not None and not isinstance(tool.parameters, dict):
            raise InputError(f"tools[{index}].parameters", "a tool's parameters are a JSON Schema object")
        names.add(tool.name)
        parameters = compact_json(tool.parameters or {}, f"tools[{index}].parameters")
        tools.append(OfferedTool(tool.name, tool.description or tool.name, parameters))
    return tuple(tools)
