"""`app.main:app`, the ASGI application: `uvicorn app.main:app`."""

from app.server.app import create_app

app = create_app()
