"""What an agent touches: AbstractAgent, ResponseHandler, text streams, hooks, ids, errors.

The public names are exported by `app` (app/__init__.py), the one front door."""
