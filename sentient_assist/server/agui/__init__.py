"""The served agent as an AG-UI backend: `POST /agui` (the `agui` extra; docs/agui.md)."""
