"""HTTP: create_app(), routes, the SSE bridge, settings."""

from app.server.app import create_app
from app.server.default_server import DefaultServer
from app.server.settings import Settings, load_settings

__all__ = ["DefaultServer", "Settings", "create_app", "load_settings"]
