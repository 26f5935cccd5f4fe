"""What an LLMAgent is given of an AG-UI input: the client's tools, and its context and state.

A client's tool (AG-UI's front-end tool: CopilotKit's `useFrontendTool`, say) is one more tool
of the agent's model for this run. Its call is the client's to make: the run stops there, as it
stops for a call that needs a person's approval (sentient_assist/llm/asking.py), and the call
goes to the client (TOOL_CALL_START/ARGS/END; sentient_assist/server/agui/events.py). The
client answers with a tool message in its next run, which resumes the paused run: the call is
"approved", and its result is the client's answer, which the model then reads.

The context (`[{description, value}]`) and the state (any JSON) are told to the model in a
system message after the agent's own instructions. The agent is served as it is; what is
given here is given to a copy of it, for one run.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping

from ag_ui.core import RunAgentInput
from ag_ui.core import Tool as AguiTool

from sentient_assist.llm.agent import LLMAgent
from sentient_assist.llm.asking import ASK_TOOL, Approval
from sentient_assist.llm.messages import ToolSpec
from sentient_assist.llm.output import OUTPUT_TOOL
from sentient_assist.llm.tools import Tool, ToolBox, ToolOutcome, Toolset
from sentient_assist.protocol.events import dumps_json
from sentient_assist.runtime.agent import AbstractAgent
from sentient_assist.runtime.errors import InputError

MAX_TOOLS = 128  # a model takes about as many (OpenAI's API: 128)
NOT_ANSWERED = "the client did not answer this call"


class ClientTool(Tool):
    """A tool the client offered: its schema is the client's, and a call is the client's to make
    (the run stops for it, as for an approval). Resumed, its result is the client's answer."""

    def __init__(self, offered: AguiTool, answers: Mapping[str, ToolOutcome]) -> None:
        def call() -> None:  # never called: `call()` answers with the client's answer
            return None

        # The client makes the call: the run stops for it, as llm/agent.py stops for an approval.
        approval = Approval(question=f"The client runs {offered.name}.")
        super().__init__(call, name=offered.name, description=offered.description or offered.name, approval=approval)
        parameters = offered.parameters if isinstance(offered.parameters, dict) else {}
        self._spec = ToolSpec(name=offered.name, description=self.description, parameters=parameters)
        self._answers = answers

    @property
    def spec(self) -> ToolSpec:
        return self._spec

    async def call(self, arguments_json: str, call_id: str | None = None) -> ToolOutcome:
        answer = self._answers.get(call_id) if call_id is not None else None
        return answer if answer is not None else ToolOutcome(error=NOT_ANSWERED)


class WithClientTools(ToolBox):
    """An agent's tools and, for one run, a client's: the agent's own as they are (its toolsets
    listed as its runs list them), then the client's."""

    def __init__(self, own: ToolBox, client: Mapping[str, ClientTool]) -> None:
        # Not ToolBox's own state: the agent's box keeps it, and is asked for it.
        self._box = own
        self._client = dict(client)

    def __getitem__(self, name: str) -> Tool:
        found = self._client.get(name)
        return found if found is not None else self._box[name]

    def __iter__(self) -> Iterator[str]:
        yield from self._box
        yield from (name for name in self._client if name not in self._box)

    def __len__(self) -> int:
        return len(self._box) + sum(1 for name in self._client if name not in self._box)

    @property
    def toolsets(self) -> tuple[Toolset, ...]:
        return self._box.toolsets

    async def ready(self) -> None:
        await self._box.ready()


def served_agent(agent: AbstractAgent, body: RunAgentInput, answers: Mapping[str, ToolOutcome]) -> AbstractAgent:
    """The agent that answers this input: `agent` itself, or, for an LLMAgent given tools,
    context or state, a copy of it that has them for this run; InputError naming a tool that
    cannot be one."""
    offered = body.tools or []
    if len(offered) > MAX_TOOLS:
        raise InputError("tools", f"at most {MAX_TOOLS} tools")
    if not isinstance(agent, LLMAgent):
        return agent  # its run finds the input in run_input()
    reserved = {ASK_TOOL, OUTPUT_TOOL}
    client: dict[str, ClientTool] = {}
    for index, tool in enumerate(offered):
        if not tool.name or tool.name in reserved or tool.name in agent.tools or tool.name in client:
            # The name is not repeated: it is the client's, of any length.
            raise InputError(
                f"tools[{index}].name", "empty, or the name of another tool of this agent (or of the input)"
            )
        if tool.parameters is not None and not isinstance(tool.parameters, dict):
            raise InputError(f"tools[{index}].parameters", "a tool's parameters are a JSON Schema object")
        client[tool.name] = ClientTool(tool, answers)
    told = _told(body)
    if not client and not told:
        return agent
    served = copy.copy(agent)
    if client:
        served.tools = WithClientTools(agent.tools, client)
    if told:
        served.system_prompt = f"{agent.system_prompt}\n\n{told}" if agent.system_prompt else told
    return served


def _told(body: RunAgentInput) -> str:
    """The context and state of the input, as the model reads them."""
    said: list[str] = []
    if body.context:
        lines = "\n".join(f"- {item.description}: {item.value}" for item in body.context)
        said.append(f"Context from the application:\n{lines}")
    if body.state not in (None, {}, []):
        said.append(f"The application's state (JSON): {dumps_json(body.state)}")
    return "\n\n".join(said)
