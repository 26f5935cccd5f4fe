"""An LLMAgent whose tools are the MCP test server's (tests/support/mcp_server.py), over stdio,
for the service tests of tests/llm/test_mcp_tools.py.

Its model, a FunctionModel (stateless: one serves every request), calls the tool the prompt
names, with the JSON after the name as its arguments (`pid`, `slow {"seconds": 5}`), then
answers with what the tool said.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path

from sentient_assist import LLMAgent
from sentient_assist.llm import ChatMessage, MCPServerStdio, ToolSpec
from sentient_assist.testing import FunctionModel, ScriptedCall, ScriptedReply

SERVER = Path(__file__).resolve().parents[1] / "support" / "mcp_server.py"


def _reply(messages: Sequence[ChatMessage], tools: Sequence[ToolSpec]) -> ScriptedReply:
    last = messages[-1]
    if last.role == "tool":
        return ScriptedReply(text=f"the tool said: {last.content}")
    name, _, arguments = last.content.strip().partition(" ")
    return ScriptedReply(tool_calls=(ScriptedCall(name, json.loads(arguments or "{}")),))


agent = LLMAgent(
    model=FunctionModel(_reply),
    name="mcp",
    description="Test agent: calls the MCP test server's tool its prompt names.",
    tools=[MCPServerStdio(sys.executable, [str(SERVER)])],
)
