"""HTTP: create_app(), add_routes(), the /assist route and its event stream, settings."""

from app.server.app import add_routes, create_app
from app.server.default_server import DefaultServer
from app.server.settings import Settings, load_settings

__all__ = ["DefaultServer", "Settings", "add_routes", "create_app", "load_settings"]
