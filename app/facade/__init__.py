"""Agent.run()/stream(): typed results and events, in-process or over HTTP, one pipeline.

The public names are exported by `app` (app/__init__.py), the one front door."""
