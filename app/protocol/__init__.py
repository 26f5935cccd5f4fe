"""Wire models of the /assist protocol (docs/protocol.md): request, session, events. No I/O.

The public names are exported by `app` (app/__init__.py), the one front door."""
