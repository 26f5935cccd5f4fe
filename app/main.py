"""`app.main:app`, this service's ASGI app: `uvicorn app.main:app`."""

from sentient_assist import create_app

app = create_app()
