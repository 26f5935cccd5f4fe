"""HTTP: the service as a FastAPI app (`create_app`), its routes in an app of yours
(`add_routes`), the settings it is built with, `DefaultServer` for scripts written the 0.3.0
way, and the uvicorn protocol that bounds a request's header block."""

from typing import TYPE_CHECKING

from sentient_assist._lazy import lazy_exports

if TYPE_CHECKING:
    from sentient_assist.server.app import add_routes, create_app
    from sentient_assist.server.default_server import DefaultServer
    from sentient_assist.server.protocol import BoundedHttpToolsProtocol
    from sentient_assist.server.settings import Settings, load_settings

_HOMES = {
    "BoundedHttpToolsProtocol": "sentient_assist.server.protocol",
    "DefaultServer": "sentient_assist.server.default_server",
    "Settings": "sentient_assist.server.settings",
    "add_routes": "sentient_assist.server.app",
    "create_app": "sentient_assist.server.app",
    "load_settings": "sentient_assist.server.settings",
}
__all__ = [
    "BoundedHttpToolsProtocol",
    "DefaultServer",
    "Settings",
    "add_routes",
    "create_app",
    "load_settings",
]
__getattr__, __dir__ = lazy_exports(__name__, _HOMES)
