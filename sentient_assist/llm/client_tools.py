"""The tools a client offered for one run (AG-UI's front-end tools: CopilotKit's
`useFrontendTool`, say), as tools of an LLMAgent's model for that run.

A client's tool is one more tool of the model for the run whose input offers it
(`RunInput.offered_tools`). Its call is the client's to make: the run stops there, as it stops
for a call that needs a person's approval (llm/asking.py), and the call goes to the client. The
client answers with the call's result in its next run (`RunInput.tool_answers`), which resumes
the paused run: the call is "approved", and its result is the client's answer.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from sentient_assist.llm.asking import Approval
from sentient_assist.llm.messages import ToolSpec
from sentient_assist.llm.tools import Tool, ToolBox, ToolOutcome, Toolset
from sentient_assist.runtime.run_input import OfferedTool, RunInput, ToolAnswer

NOT_ANSWERED = "the client did not answer this call"


class ClientTool(Tool):
    """A tool the client offered: its schema is the client's, and a call is the client's to make
    (the run stops for it, as for an approval). Resumed, its result is the client's answer."""

    def __init__(self, offered: OfferedTool, answers: Mapping[str, ToolAnswer]) -> None:
        def call() -> None:  # never called: `call()` answers with the client's answer
            return None

        # The client makes the call: the run stops for it, as llm/agent.py stops for an approval.
        approval = Approval(question=f"The client runs {offered.name}.")
        super().__init__(call, name=offered.name, description=offered.description or offered.name, approval=approval)
        self._spec = ToolSpec(name=offered.name, description=self.description, parameters=dict(offered.parameters))
        self._answers = answers

    @property
    def spec(self) -> ToolSpec:
        return self._spec

    async def call(self, arguments_json: str, call_id: str | None = None) -> ToolOutcome:
        answer = self._answers.get(call_id) if call_id is not None else None
        if answer is None:
            return ToolOutcome(error=NOT_ANSWERED)
        return ToolOutcome(error=answer.error) if answer.error else ToolOutcome(result=answer.result)


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


def tools_for_run(own: ToolBox, run_input: RunInput) -> ToolBox:
    """An agent's tools for one run: its own, and the client's that `run_input` offers."""
    if not run_input.offered_tools:
        return own
    answers = run_input.tool_answers
    return WithClientTools(own, {tool.name: ClientTool(tool, answers) for tool in run_input.offered_tools})
