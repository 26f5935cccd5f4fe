"""LLMAgent: a language model that streams its answer and calls tools, written once, correctly.

    LLMAgent(model=OpenAIChatModel("gpt-4o-mini"), system_prompt="...", tools=[now, calculate])

Optional behaviour comes as typed config objects; an absent one means the
behaviour is off (UsageLimits, ModelSettings).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from sentient_assist.llm.asking import ASK_TOOL, REFUSED, AskUser, Paused, Question, approves
from sentient_assist.llm.client_tools import tools_for_run
from sentient_assist.llm.messages import (
    ChatMessage,
    ToolCallRequest,
    assistant,
    chat_history,
    system,
    tool_result,
    user,
)
from sentient_assist.llm.model import ChatModel, ModelSettings
from sentient_assist.llm.output import OUTPUT_TOOL, OutputSpec, output_call
from sentient_assist.llm.reply import ONE_REQUEST, ReplyStreams, finish_run, stream_reply
from sentient_assist.llm.tools import SupportsTool, Tool, ToolBox, ToolOutcome, Toolset, arguments_object
from sentient_assist.protocol import conventions as names
from sentient_assist.protocol.conventions import TokenUsage, ToolCallPayload, ToolResultPayload
from sentient_assist.protocol.history import messages_from
from sentient_assist.protocol.request import Query
from sentient_assist.runtime.agent import AbstractAgent
from sentient_assist.runtime.capability import CapabilityConfig
from sentient_assist.runtime.errors import AgentRunError, ModelProviderError, UsageLimitExceeded
from sentient_assist.runtime.request_context import current_request_id
from sentient_assist.runtime.response_handler import ResponseHandler
from sentient_assist.runtime.session import Session

logger = logging.getLogger("sentient_assist.llm")


@dataclass(frozen=True)
class UsageLimits(CapabilityConfig):
    """Bounds on one run. `max_turns`: model replies (each tool round is one, and each retry
    of a typed output); `max_tokens`: total tokens reported by the provider, checked after
    each reply; `max_output_retries`: replies whose output did not validate (or was missing)
    that are sent back to the model to try again, with what was wrong."""

    max_turns: int = 10
    max_tokens: int | None = None
    max_output_retries: int = 2


class LLMAgent(AbstractAgent):
    """Streams reasoning to THINKING and the answer to FINAL_RESPONSE as they arrive (text before
    a tool call included), emits TOOL_CALL, runs one turn's calls concurrently, emits TOOL_RESULT,
    loops, and ends with a USAGE document summed over the run. Provider failures become error
    events a user can act on."""

    def __init__(
        self,
        *,
        model: ChatModel,
        name: str = "llm",
        description: str = "",
        system_prompt: str = "",
        tools: Sequence[Tool | Callable[..., object] | SupportsTool | Toolset] = (),
        model_settings: ModelSettings | None = None,
        usage_limits: UsageLimits = UsageLimits(),
        output_type: type[object] | None = None,
        ask_user: AskUser | None = None,
    ) -> None:
        super().__init__(name)
        self.description = description or self.description
        self.model = model
        self.system_prompt = system_prompt
        # Functions become tools as @tool makes them, BasicAgents through as_tool(); the rest is refused now.
        # An MCP server's tools (llm/mcp.py) join them when it is listed, at the first run.
        self.tools = _tools_of(tools, output_type is not None, ask_user is not None)
        self.model_settings = model_settings or ModelSettings()
        self.usage_limits = usage_limits
        # With an output type, the run ends with a validated value (an OUTPUT document); see llm/output.py.
        self.output: OutputSpec[object] | None = OutputSpec(output_type) if output_type is not None else None
        # With AskUser, the model can ask the person: the run pauses, the answer resumes it (llm/asking.py).
        self.ask_user = ask_user

    async def assist(self, session: Session, query: Query, response_handler: ResponseHandler) -> None:
        await self.tools.ready()  # its MCP servers' tools, listed at the first run (a clash refused then)
        run_input = response_handler.run_input
        # The tools a client offered for this run join the agent's own, for this run only.
        tools = tools_for_run(self.tools, run_input)
        messages, run_start, decided = self._conversation(session, query, run_input.told())
        if decided is not None:  # resumed after an approval: the call runs, or is refused, first
            await self._decide(decided, query.prompt, messages, response_handler, tools)
        streams = ReplyStreams(response_handler)
        held: list[ToolCallRequest] = []
        usage, failure = await self._loop(messages, response_handler, streams, held, tools)
        if failure is not None:
            logger.warning("model %s stopped: %s (request %s)", self.model.name, failure.message, current_request_id())
        if held and failure is None:
            await self._pause(response_handler, streams, usage, messages[run_start:], held[0], tools)
            return
        await finish_run(response_handler, streams, usage, failure)

    async def aclose(self) -> None:
        """Close what its toolsets hold open (its MCP servers' sessions, their processes stopped)."""
        await asyncio.gather(*(toolset.aclose() for toolset in self.tools.toolsets))

    def _conversation(
        self, session: Session, query: Query, told: str = ""
    ) -> tuple[list[ChatMessage], int, ToolCallRequest | None]:
        """What the model reads, where this run's own messages start in it, and a call waiting
        for the person's decision: the system prompt, the chat so far, the prompt; or, resuming
        a pause of ours, the chat before the paused turn, then the paused run's messages, with
        the answer as the ask_user call's result (or the call approved or refused, to come)."""
        # What the run's input tells the model (a client's context and state) follows the agent's own instructions.
        instructions = "\n\n".join(part for part in (self.system_prompt, told) if part)
        messages: list[ChatMessage] = [system(instructions)] if instructions else []
        interactions = list(session.get_interactions())
        paused = Paused.of(session.resumed.state) if session.resumed is not None else None
        if paused is None:
            messages += chat_history(messages_from(interactions, keep_events=False))
            messages.append(user(query.prompt))
            return messages, len(messages) - 1, None
        messages += chat_history(messages_from(interactions[:-1], keep_events=False))  # before the paused turn
        start = len(messages)
        messages += paused.messages
        if paused.approval:
            return messages, start, paused.call
        return [*messages, tool_result(paused.call, query.prompt)], start, None

    async def _decide(
        self, call: ToolCallRequest, answer: str, messages: list[ChatMessage], handler: ResponseHandler, tools: ToolBox
    ) -> None:
        """The person's decision on a call that waited for approval: it runs, or the model is told no."""
        if approves(answer):
            await self._run_tools([call], messages, handler, tools)
            return
        await self._announce([call], handler)
        await self._answer(call, ToolOutcome(error=REFUSED), messages, handler)

    async def _pause(
        self,
        handler: ResponseHandler,
        streams: ReplyStreams,
        usage: TokenUsage,
        run_messages: list[ChatMessage],
        call: ToolCallRequest,
        tools: ToolBox,
    ) -> None:
        """The run stops for the person: its text streams end, its bill (USAGE), then the
        question (ASK_USER) or the call to approve (INTERRUPT), and done."""
        await streams.close(names.THINKING)
        await streams.close(names.FINAL_RESPONSE)
        await handler.emit_json(names.USAGE, usage)
        if call.name == ASK_TOOL and self.ask_user is not None:
            asked = Question.of(call)
            state = Paused(run_messages, call, approval=False).state()
            await handler.ask_user(asked.question, choices=asked.choices, state=state)
            return
        arguments = arguments_object(call.arguments)
        approval = tools[call.name].approval
        question = (approval.question if approval is not None else "") or f"Run {call.name}?"
        await handler.interrupt(
            "approval",
            question=question,
            tool_call=ToolCallPayload(id=call.id, name=call.name, arguments=arguments),
            state=Paused(run_messages, call, approval=True).state(),
        )

    async def _loop(
        self,
        messages: list[ChatMessage],
        handler: ResponseHandler,
        streams: ReplyStreams,
        held: list[ToolCallRequest],
        tools: ToolBox,
    ) -> tuple[TokenUsage, AgentRunError | None]:
        """The run's replies and tool rounds: what they used, and what stopped them early, if
        anything; a call that needs the person (ask_user, or a tool waiting for approval) goes
        in `held`, and stops them too."""
        specs = [t.spec for t in tools.values()]
        if self.ask_user is not None:
            specs.append(self.ask_user.tool)
        if self.output is not None:
            specs.append(self.output.tool)
        limits = self.usage_limits
        usage = TokenUsage()
        output_retries = 0
        for _ in range(limits.max_turns):
            usage += ONE_REQUEST
            try:
                reply = await stream_reply(self.model, messages, specs, self.model_settings, streams)
            except ModelProviderError as failure:
                return usage, failure
            usage += reply.usage
            # With an output type, a reply that calls other tools only is an ordinary tool round.
            if self.output is not None and (not reply.calls or output_call(reply.calls) is not None):
                wrong = await self._output_of(reply.calls, reply.text, messages, handler, tools)
                if wrong is None:
                    return usage, None
                output_retries += 1
                if output_retries > limits.max_output_retries:
                    message = (
                        f"Stopped: the model's answer did not fit the output type after {output_retries} tries "
                        f"({wrong})."
                    )
                    return usage, UsageLimitExceeded(message, "max_output_retries")
                continue
            messages.append(assistant(reply.text, tuple(reply.calls)))
            if not reply.calls:
                return usage, None
            pausing = [c for c in reply.calls if self._needs_person(c, tools)]
            await self._run_tools([c for c in reply.calls if c not in pausing], messages, handler, tools)
            if pausing:
                # The run pauses at the first; the others are told to wait their turn (every call is answered).
                for later in pausing[1:]:
                    messages.append(tool_result(later, "error: one question to the user at a time; ask again"))
                held.append(pausing[0])
                return usage, None
            if limits.max_tokens is not None and usage.total_tokens >= limits.max_tokens:
                message = f"Stopped: the run used {usage.total_tokens} tokens, the limit is {limits.max_tokens}."
                return usage, UsageLimitExceeded(message, "max_tokens")
        message = f"Stopped: the model was still calling tools after {limits.max_turns} turns."
        return usage, UsageLimitExceeded(message, "max_turns")

    def _needs_person(self, call: ToolCallRequest, tools: ToolBox) -> bool:
        if call.name == ASK_TOOL:
            return self.ask_user is not None
        found = tools.get(call.name)
        return found is not None and found.approval is not None

    async def _output_of(
        self,
        calls: list[ToolCallRequest],
        text: str,
        messages: list[ChatMessage],
        handler: ResponseHandler,
        tools: ToolBox,
    ) -> str | None:
        """For a reply that gave its output, or answered in text alone: send the output if it
        is valid (None); else say what was wrong, with the conversation set for the model to
        try again (the reply's other calls run, as in any tool round)."""
        assert self.output is not None
        call = output_call(calls)
        if call is None:
            messages.append(assistant(text))
            messages.append(user(f"Give your final answer by calling {OUTPUT_TOOL}."))
            return f"the model answered without calling {OUTPUT_TOOL}"
        try:
            value = self.output.validate(call.arguments)
        except ValueError as exc:
            wrong = str(exc)
        else:
            await handler.emit_json(names.OUTPUT, {"output": self.output.dump(value)})
            return None
        messages.append(assistant(text, tuple(calls)))
        await self._run_tools([c for c in calls if c is not call], messages, handler, tools)
        messages.append(tool_result(call, f"error: {wrong}. Call {OUTPUT_TOOL} again, with the arguments corrected."))
        return wrong

    async def _run_tools(
        self, calls: list[ToolCallRequest], messages: list[ChatMessage], handler: ResponseHandler, tools: ToolBox
    ) -> None:
        await self._announce(calls, handler)
        outcomes = await asyncio.gather(*(_call(tools, call) for call in calls))
        for call, outcome in zip(calls, outcomes, strict=False):
            await self._answer(call, outcome, messages, handler)

    async def _announce(self, calls: list[ToolCallRequest], handler: ResponseHandler) -> None:
        """TOOL_CALL for each call, before any of them runs."""
        for call in calls:
            arguments = arguments_object(call.arguments)
            await handler.emit_json(names.TOOL_CALL, ToolCallPayload(id=call.id, name=call.name, arguments=arguments))

    async def _answer(
        self, call: ToolCallRequest, outcome: ToolOutcome, messages: list[ChatMessage], handler: ResponseHandler
    ) -> None:
        """What became of a call: TOOL_RESULT for the client, the tool message for the model."""
        result = ToolResultPayload(id=call.id, name=call.name, result=outcome.result, error=outcome.error)
        await handler.emit_json(names.TOOL_RESULT, result)
        messages.append(tool_result(call, outcome.model_content))


async def _call(tools: ToolBox, call: ToolCallRequest) -> ToolOutcome:
    found = tools.get(call.name)
    if found is None:
        return ToolOutcome(error=f"there is no tool named {call.name!r}; the tools are: {', '.join(tools) or 'none'}")
    return await found.call(call.arguments, call_id=call.id)


def _tools_of(items: Iterable[object], has_output: bool, has_ask_user: bool) -> ToolBox:
    """The tools by name, each item made a Tool; what cannot be one, or a second tool of one
    name, is refused here, when the agent is built, rather than at every run. A Toolset (an MCP
    server) is kept as it is: its tools are known once it is listed, and their names checked then."""
    if isinstance(items, str) or not isinstance(items, Iterable):  # tools=add, for tools=[add]
        kind = type(items).__name__
        raise TypeError(f"tools= takes a list of tools, got {_a(kind)} {kind}: write tools=[{_short(items)}]")
    reserved = {OUTPUT_TOOL: "the typed output (output_type=)"} if has_output else {}
    if has_ask_user:
        reserved[ASK_TOOL] = "ask_user="
    tools: dict[str, Tool] = {}
    positions: dict[str, int] = {}
    toolsets: list[tuple[str, Toolset]] = []
    for position, item in enumerate(items):
        if isinstance(item, Toolset):
            toolsets.append((f"tools[{position}] ({item.label})", item))
            continue
        made = _as_tool(item, position)
        if made.name in positions:
            raise ValueError(
                f"tools[{positions[made.name]}] and tools[{position}] are both named {made.name!r}: the model "
                "calls a tool by name, so give one another (@tool(name=...), or the BasicAgent's metadata['name'])"
            )
        if made.name in reserved:
            raise ValueError(
                f"tools[{position}] is named {made.name!r}, as is the tool {reserved[made.name]} adds: "
                "give it another name (@tool(name=...), or the BasicAgent's metadata['name'])"
            )
        tools[made.name] = made
        positions[made.name] = position
    return ToolBox(tools, {name: f"tools[{at}]" for name, at in positions.items()}, toolsets, reserved)


def _as_tool(item: object, position: int) -> Tool:
    """`item` as a Tool: a Tool as it is, a function as `@tool` makes it, a BasicAgent through
    `agent_tool()` (its metadata is the schema); TypeError, naming it, for anything else."""
    if isinstance(item, Tool):
        return item
    if inspect.isfunction(item) or inspect.ismethod(item):
        try:
            return Tool(item)
        except TypeError as exc:  # e.g. *args: the position says which item it was
            raise TypeError(f"tools[{position}]: {exc}") from exc
    if isinstance(item, SupportsTool) and not isinstance(item, type):  # a BasicAgent (a class is not one)
        return item.as_tool()
    kind = type(item).__name__
    what = f"the class {item.__name__}" if isinstance(item, type) else f"{_a(kind)} {kind}"
    hint = f" (an instance, {item.__name__}(), if it is an agent)" if isinstance(item, type) else ""
    if isinstance(item, AbstractAgent):
        hint = " (an agent other than a BasicAgent is a specialist of a HostAgent, not a tool)"
    raise TypeError(
        f"tools[{position}] is {what}: pass a function, a coroutine function, a Tool or a BasicAgent{hint}, "
        "or an MCP server (MCPServerStdio, MCPServerStreamableHTTP)"
    )


def _short(value: object) -> str:
    return getattr(value, "__name__", None) or getattr(value, "name", None) or repr(value)[:40]


def _a(noun: str) -> str:
    return "an" if noun[:1].lower() in "aeiou" else "a"
