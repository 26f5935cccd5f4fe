"""HTTP: create_app(), add_routes(), the /assist route and its event stream, settings.

The public names are exported by `app` (app/__init__.py), the one front door."""
