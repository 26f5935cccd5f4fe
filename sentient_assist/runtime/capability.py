"""CapabilityConfig: how optional behaviour is switched on, everywhere in the framework.

An optional behaviour takes a typed configuration object: pass one to switch the behaviour
on, with its settings; leave it out (None) and the behaviour is off. No public signature
takes a boolean feature flag (tests/test_front_door.py holds every exported one to it).

    chain(agents, prompt, stop_on_failure=StopOnFailure())     # on
    chain(agents, prompt)                                       # off
    LLMAgent(model=..., usage_limits=UsageLimits(max_turns=4))  # its settings
"""

from __future__ import annotations


class CapabilityConfig:
    """The base of the configuration objects of optional behaviour (UsageLimits, ModelSettings,
    StopOnFailure, ...): frozen dataclasses, whose presence means on."""

    __slots__ = ()
