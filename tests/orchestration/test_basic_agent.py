"""openrappter's agent contract: a class with `metadata` and `perform(**kwargs)` is an agent
here, its import line the only change: execute() and its slush, get_signal(), at /assist,
as an LLMAgent's tool, and as a step of a chain."""

from __future__ import annotations

import asyncio
import json

import pytest

from sentient_assist import Agent, LLMAgent, Router, RouterAgent
from sentient_assist.compat import BasicAgent, agent_tool
from sentient_assist.orchestration.broadcast import chain
from sentient_assist.registry import load_agent
from sentient_assist.testing import ScriptedCall, ScriptedModel, ScriptedReply
from tests.support.sse import new_body, read_stream


class Planner(BasicAgent):
    """Written the openrappter way: name and metadata set, then the base's __init__."""

    def __init__(self):
        self.name = "Planner"
        self.metadata = {
            "name": self.name,
            "description": "Plans a trip",
            "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
        }
        super().__init__(name=self.name, metadata=self.metadata)

    def perform(self, **kwargs):
        return json.dumps(
            {
                "status": "success",
                "response": f"Planned: {kwargs['query']}",
                "asked": self.get_signal("query_signals.is_question"),
                "data_slush": self.slush_out(signals={"city": "Lima"}),
            }
        )


class Packer(BasicAgent):
    """An async perform that reads what the planner left."""

    def __init__(self):
        super().__init__(name="Packer", metadata={"name": "Packer", "description": "Packs", "parameters": {}})

    async def perform(self, **kwargs):
        await asyncio.sleep(0)
        city = self.get_signal("upstream_slush.signals.city", "nowhere")
        assert self.get_signal("upstream_slush.city") == city  # one of its signals, by its own name
        return {"response": f"Packing for {city}"}


def test_execute_sloshes_performs_and_keeps_the_data_slush_for_the_next_agent():
    planner = Planner()
    result = json.loads(planner.execute(query="Where should I go?"))
    assert result["response"] == "Planned: Where should I go?" and result["asked"] is True
    slush = planner.last_data_slush
    assert slush["source_agent"] == "Planner" and slush["signals"] == {"city": "Lima"}
    packed = asyncio.run(Packer().execute(query="pack", upstream_slush=slush))  # a plain dict
    assert packed == {"response": "Packing for Lima"}
    assert planner.get_signal("temporal.time_of_day") is None  # outside a call: no context


async def test_contexts_are_per_call_not_shared_by_concurrent_requests():
    class Echo(BasicAgent):
        async def perform(self, **kwargs):
            await asyncio.sleep(0.01)
            return {"response": ",".join(self.get_signal("query_signals.keywords", ()))}

    echo = Echo(name="echo")
    first, second = await asyncio.gather(echo.execute(query="bananas bananas"), echo.execute(query="cherries"))
    assert (first["response"], second["response"]) == ("bananas", "cherries")


async def test_at_assist_in_process_the_prompt_is_the_query_and_the_json_result_a_document_and_an_answer():
    result = await Agent(Planner()).run("a week in Peru")
    assert result.text == "Planned: a week in Peru"
    (document,) = [e for e in result.messages[-1].events if e["event_name"] == "RESULT"]
    assert document["content"]["status"] == "success"
    typed = await Agent(load_agent("rappter_weather")).run('{"city": "Kyoto"}')  # JSON: the keyword arguments
    assert typed.text.startswith("Sunny in Kyoto")


def test_the_registry_serves_an_openrappter_agent_from_agents_at_assist(serve):
    stream = read_stream(serve({"ASSIST_AGENT": "rappter_weather"}).url, new_body('{"city": "Lima"}'))
    answer = "".join(e["content"] for e in stream.events if e["event_name"] == "FINAL_RESPONSE")
    assert stream.status == 200 and answer.startswith("Sunny in Lima")
    (document,) = [e["content"] for e in stream.events if e["event_name"] == "RESULT"]
    assert document["data_slush"]["signals"] == {"city": "Lima", "sky": "sunny"}


async def test_an_openrappter_agent_is_a_tool_of_an_llm_agent_with_its_metadata_as_schema():
    model = ScriptedModel(
        [
            ScriptedReply(tool_calls=(ScriptedCall("Planner", {"query": "Peru"}),)),
            ScriptedReply(text="Done."),
        ]
    )
    result = await Agent(LLMAgent(model=model, tools=[agent_tool(Planner())])).run("plan it")
    (offered,) = model.calls[0][1]
    assert (offered.name, offered.parameters["required"]) == ("Planner", ["query"])
    (call,) = result.tool_calls
    assert call.result["response"] == "Planned: Peru" and call.error is None


async def test_in_a_chain_the_data_slush_goes_on_as_the_next_agents_upstream_slush():
    planner, packer = Planner(), Packer()
    outcomes = await chain([planner, packer], "a trip")
    assert [o.status for o in outcomes] == ["ok", "ok"]
    assert outcomes[1].result is not None and outcomes[1].result.text == "Packing for Lima"


def test_an_agent_without_perform_says_so():
    class Empty(BasicAgent):
        pass

    with pytest.raises(NotImplementedError, match="perform"):
        Empty(name="empty").execute(query="x")


SIGNALS = [
    "temporal.time_of_day",
    "temporal.hour",
    "temporal.minute",
    "temporal.day_of_week",
    "temporal.is_weekend",
    "query.intent",
    "query.entities",
    "query.sentiment",
    "query.complexity",
    "memory.recent_memories",
    "behavioral.interaction_count",
    "behavioral.patterns",
    "orientation.confidence",
    "orientation.approach",
    "orientation.hints",
]


class SignalReader(BasicAgent):
    """Answers with every signal openrappter users read, as get_signal() gives them."""

    def __init__(self):
        super().__init__(name="signals", metadata={"name": "signals", "description": "reads signals"})

    def perform(self, **kwargs):
        return {"response": "read", "signals": {key: self.get_signal(key) for key in SIGNALS}}


async def test_every_agent_has_a_context_with_openrappters_signal_names_the_served_one_included():
    history = [{"role": "user", "content": "What is good in Oslo?"}, {"role": "assistant", "content": "Fish."}]
    result = await Agent(SignalReader()).run("Please book Noma in Copenhagen for 4, thanks!", history=history)
    (document,) = [e["content"] for e in result.messages[-1].events if e["event_name"] == "RESULT"]
    signals = document["signals"]
    assert all(signals[key] is not None for key in SIGNALS), signals
    assert (signals["query.intent"], signals["query.sentiment"]) == ("request", "positive")
    assert signals["query.entities"] == ["Noma", "Copenhagen", "4"]
    assert signals["memory.recent_memories"] == ["What is good in Oslo?"]  # the served agent sees its history
    assert signals["behavioral.interaction_count"] == 1 and "asks_questions" in signals["behavioral.patterns"]
    assert 0 <= signals["temporal.minute"] < 60


async def test_a_router_served_at_the_top_routing_to_an_agent_that_leaves_slush_answers_cleanly():
    router = Router(default=Planner())
    result = await Agent(RouterAgent(router)).run("a trip")
    assert result.text == "Planned: a trip" and not result.errors


async def test_as_a_tool_it_keeps_every_tools_bounds_a_timeout_and_a_json_result():
    class Stuck(BasicAgent):
        async def perform(self, **kwargs):
            await asyncio.sleep(60)

    class Odd(BasicAgent):
        def perform(self, **kwargs):
            return {"response": object()}

    stuck = await agent_tool(Stuck(name="stuck"), timeout=0.05).call("{}")
    assert stuck.error == "the tool did not finish within 0.05 seconds"
    odd = await agent_tool(Odd(name="odd")).call("{}")
    assert odd.error is not None and "cannot be written as JSON" in odd.error
    broken = await agent_tool(Planner()).call("[1]")
    assert broken.error == "the arguments must be a JSON object"
