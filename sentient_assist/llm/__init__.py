"""Language-model agents: `LLMAgent` (the streaming tool loop), the `ChatModel` interface, its
OpenAI-compatible implementation and `LocalChatModel` (a GGUF model in the process, the `local`
extra), the messages and events a model exchanges, tools (a function's, or an MCP server's:
`MCPServerStdio`, `MCPServerStreamableHTTP`), and the pauses a model can ask for (`AskUser`,
`Approval`). Scripted models for tests are in `sentient_assist.testing`."""

from typing import TYPE_CHECKING

from sentient_assist._lazy import lazy_exports

if TYPE_CHECKING:
    from sentient_assist.llm.agent import LLMAgent, UsageLimits
    from sentient_assist.llm.asking import Approval, AskUser
    from sentient_assist.llm.local_model import LocalChatModel
    from sentient_assist.llm.mcp import MCPServerStdio, MCPServerStreamableHTTP
    from sentient_assist.llm.messages import (
        ChatMessage,
        ModelEvent,
        ReasoningDelta,
        TextDelta,
        ToolCallRequest,
        ToolSpec,
    )
    from sentient_assist.llm.model import ChatModel, ModelSettings
    from sentient_assist.llm.openai_model import OpenAIChatModel
    from sentient_assist.llm.tools import Tool, ToolOutcome, tool

_HOMES = {
    "Approval": "sentient_assist.llm.asking",
    "AskUser": "sentient_assist.llm.asking",
    "ChatMessage": "sentient_assist.llm.messages",
    "ChatModel": "sentient_assist.llm.model",
    "LLMAgent": "sentient_assist.llm.agent",
    "LocalChatModel": "sentient_assist.llm.local_model",
    "MCPServerStdio": "sentient_assist.llm.mcp",
    "MCPServerStreamableHTTP": "sentient_assist.llm.mcp",
    "ModelEvent": "sentient_assist.llm.messages",
    "ModelSettings": "sentient_assist.llm.model",
    "OpenAIChatModel": "sentient_assist.llm.openai_model",
    "ReasoningDelta": "sentient_assist.llm.messages",
    "TextDelta": "sentient_assist.llm.messages",
    "Tool": "sentient_assist.llm.tools",
    "ToolCallRequest": "sentient_assist.llm.messages",
    "ToolOutcome": "sentient_assist.llm.tools",
    "ToolSpec": "sentient_assist.llm.messages",
    "UsageLimits": "sentient_assist.llm.agent",
    "tool": "sentient_assist.llm.tools",
}
__all__ = [
    "Approval",
    "AskUser",
    "ChatMessage",
    "ChatModel",
    "LLMAgent",
    "LocalChatModel",
    "MCPServerStdio",
    "MCPServerStreamableHTTP",
    "ModelEvent",
    "ModelSettings",
    "OpenAIChatModel",
    "ReasoningDelta",
    "TextDelta",
    "Tool",
    "ToolCallRequest",
    "ToolOutcome",
    "ToolSpec",
    "UsageLimits",
    "tool",
]
__getattr__, __dir__ = lazy_exports(__name__, _HOMES)
