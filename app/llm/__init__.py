"""Language-model agents: the ChatModel interface, OpenAI-compatible and scripted models,
tools, and LLMAgent, the streaming tool loop.

The public names are exported by `app` (app/__init__.py), the one front door."""
