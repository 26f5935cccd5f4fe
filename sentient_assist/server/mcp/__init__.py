"""The served agent as an MCP server, at /mcp (docs/mcp.md, "The agent as an MCP server").

`mount` adds it to an app without importing the mcp SDK; `face` and `tool` need the SDK, the
`mcp` extra: pip install 'sentient-assist[mcp]'.
"""
