"""The seed concepts of openrappter and CloudWeGo Eino, each as it is written here.

    python examples/seed_concepts.py

Offline: the models are stand-ins (FunctionModel), no key, no network. The table in
docs/orchestration.md ("Coming from openrappter or Eino") points at each part.
"""

from __future__ import annotations

import asyncio
import json

from sentient_assist import (
    Agent,
    HostAgent,
    LLMAgent,
    Router,
    RouterAgent,
    Specialist,
    broadcast_all,
    call_agent,
    chain,
)
from sentient_assist.compat import BasicAgent, agent_tool
from sentient_assist.orchestration import StopOnFailure, handoff_callbacks
from sentient_assist.testing import FunctionModel, ScriptedCall, ScriptedModel, ScriptedReply


class Weather(BasicAgent):
    """openrappter: a BasicAgent, its metadata and perform(); get_signal(); slush_out()."""

    def __init__(self):
        self.name = "Weather"
        self.metadata = {
            "name": self.name,
            "description": "The weather in a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        }
        super().__init__(name=self.name, metadata=self.metadata)

    def perform(self, **kwargs):
        city = kwargs.get("city") or self.get_signal("upstream_slush.signals.city") or "Oslo"
        return json.dumps(
            {
                "status": "success",
                "response": f"Sunny in {city}",
                "data_slush": self.slush_out(signals={"city": city, "sky": "sunny"}),
            }
        )


class Outfit(BasicAgent):
    """Reads what the agent before it left (upstream_slush)."""

    def __init__(self):
        super().__init__(name="Outfit", metadata={"name": "Outfit", "description": "What to wear"})

    def perform(self, **kwargs):
        sky = self.get_signal("upstream_slush.signals.sky", "unknown")
        return json.dumps({"status": "success", "response": f"The sky is {sky}: wear sunglasses"})


def host_model(messages, tools) -> ScriptedReply:
    """Eino's host: hands the weather to the Weather specialist."""
    if messages[-1].role == "tool":
        return ScriptedReply(text="Handed over.")
    return ScriptedReply(tool_calls=(ScriptedCall("Weather", {"reason": "a weather question"}),))


async def main() -> None:
    # openrappter: execute() (slosh, perform, slush), data_slush -> upstream_slush
    weather = Weather()
    print("execute:", json.loads(weather.execute(city="Lima"))["response"])
    worn = json.loads(Outfit().execute(query="what to wear?", upstream_slush=weather.last_data_slush))
    print("upstream_slush:", worn["response"])

    # openrappter's BroadcastManager: broadcast_all (and race, fallback)
    outcomes = await broadcast_all([Weather(), Outfit()], "now")
    print("broadcast:", [(o.agent, o.status) for o in outcomes])

    # a chain: each agent's data_slush goes on as the next one's upstream_slush
    chained = await chain([Weather(), Outfit()], "Lima", stop_on_failure=StopOnFailure())
    print("chain:", chained[-1].result.text if chained[-1].result else None)

    # openrappter's AgentRouter: Router + RouterAgent (lower priority numbers first)
    router = Router(default=Outfit())
    router.add(name="weather", agent=Weather(), prompt_pattern="(?i)weather", priority=1)
    print("router:", (await Agent(RouterAgent(router)).run("weather please")).text)

    # openrappter's SubAgentManager: call_agent (depth and loop guards, the slush it left)
    called = await call_agent(Weather(), '{"city": "Kyoto"}')
    print("sub-agent:", called.result.text, called.slush.signals if called.slush else None)

    # an openrappter agent as a tool of a language model: its metadata is the schema
    model = ScriptedModel([ScriptedReply(tool_calls=(ScriptedCall("Weather", {"city": "Rome"}),)), ScriptedReply()])
    tooled = await Agent(LLMAgent(model=model, tools=[agent_tool(Weather())])).run("weather in Rome?")
    print("tool:", tooled.tool_calls[0].result["response"])

    # Eino: host and specialist (AgentMeta: the specialist's name and intended use),
    # OnHandOff (the target and the raw argument), MultiAgentConfig (HostAgent's arguments)
    async def on_handoff(handoff):
        print("OnHandOff:", handoff.to_agent, handoff.argument)

    host = HostAgent(
        model=FunctionModel(host_model),
        specialists=[Specialist(Weather(), "answers weather questions")],
        on_handoff=[on_handoff],
    )
    with handoff_callbacks(on_handoff):  # per run, as Eino's per-call options
        answered = await Agent(host).run("Is it sunny?")
    print("host -> specialist:", answered.text)


if __name__ == "__main__":
    asyncio.run(main())
