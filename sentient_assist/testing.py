"""Test an agent with no network and no mocks: models that are real implementations of the
`ChatModel` interface, answering from a script or a function, and a hook that keeps every
event an agent sends."""

from sentient_assist.llm.scripted import FunctionModel, ScriptedCall, ScriptedModel, ScriptedReply
from sentient_assist.runtime.hook import QueueHook

__all__ = ["FunctionModel", "QueueHook", "ScriptedCall", "ScriptedModel", "ScriptedReply"]
