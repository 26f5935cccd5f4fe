"""An agent written for openrappter, run here with only its import line changed.

`metadata` and `perform(**kwargs)`: at /assist the prompt is `query` (a prompt that is a JSON
object gives the keyword arguments: `{"city": "Lima"}`); the JSON result is sent as a
RESULT document and its `response` as the answer; its `data_slush` goes on to the next agent
of a chain. No key, no network.
"""

import json

from sentient_assist.compat import BasicAgent


class RappterWeatherAgent(BasicAgent):
    def __init__(self):
        self.name = "rappter_weather"
        self.metadata = {
            "name": self.name,
            "description": "The weather in a city, the openrappter way (metadata + perform).",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string", "description": "The city."}},
                "required": [],
            },
        }
        super().__init__(name=self.name, metadata=self.metadata)

    def perform(self, **kwargs):
        city = kwargs.get("city") or self.get_signal("upstream_slush.signals.city") or "Oslo"
        part_of_day = self.get_signal("temporal.time_of_day", "day")
        return json.dumps(
            {
                "status": "success",
                "response": f"Sunny in {city} this {part_of_day}.",
                "data_slush": self.slush_out(signals={"city": city, "sky": "sunny"}),
            }
        )
