"""Whether the server is draining: SIGTERM received, finishing what it has, taking nothing new."""


def is_draining() -> bool:
    # Learnt from uvicorn's internals, which live in protocol.py alone; imported here, not at the
    # top, as protocol.py imports event_stream.py, whose OpenStreams asks this.
    from sentient_assist.server.protocol import uvicorn_is_exiting

    return uvicorn_is_exiting()
