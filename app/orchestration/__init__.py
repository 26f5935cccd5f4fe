"""Agents working together: a host and its specialists, routing, broadcast, sub-agent calls
guarded by depth and loop checks, and context signals and data slush passed between agents.

The public names are exported by `app` (app/__init__.py), the one front door."""
