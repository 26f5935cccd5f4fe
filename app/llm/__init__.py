"""Language-model agents: the ChatModel interface, OpenAI-compatible and scripted models,
tools, and LLMAgent, the streaming tool loop."""

from app.llm.agent import LLMAgent, UsageLimits
from app.llm.messages import ChatMessage, ReasoningDelta, TextDelta, ToolCallRequest, ToolSpec
from app.llm.model import ChatModel, ModelSettings
from app.llm.openai_model import OpenAIChatModel
from app.llm.reply import Reply, ReplyStreams, stream_reply
from app.llm.scripted import FunctionModel, ScriptedCall, ScriptedModel, ScriptedReply
from app.llm.tools import Tool, ToolOutcome, tool
from app.protocol.conventions import TokenUsage
from app.runtime.errors import ToolError

__all__ = [
    "ChatMessage",
    "ChatModel",
    "FunctionModel",
    "LLMAgent",
    "ModelSettings",
    "OpenAIChatModel",
    "ReasoningDelta",
    "Reply",
    "ReplyStreams",
    "ScriptedCall",
    "ScriptedModel",
    "ScriptedReply",
    "TextDelta",
    "TokenUsage",
    "Tool",
    "ToolCallRequest",
    "ToolError",
    "ToolOutcome",
    "ToolSpec",
    "UsageLimits",
    "stream_reply",
    "tool",
]
