"""The served agent as an A2A agent: its card at /.well-known/agent-card.json, JSON-RPC at /a2a
(docs/a2a.md).

`mount` adds it to an app without importing a2a-sdk; the other modules need the SDK, the `a2a`
extra: pip install 'sentient-assist[a2a]'.
"""
