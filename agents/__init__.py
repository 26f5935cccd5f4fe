"""Agents: one file, one agent. `ASSIST_AGENT=<file name>` serves it; nothing else lists it."""
