"""Whether the server is draining: SIGTERM received, finishing what it has, taking nothing new."""

import signal


def is_draining() -> bool:
    # uvicorn installs its Server's bound `handle_exit` as the SIGTERM handler (with
    # signal.signal, in every process it serves from, workers included), and that server's
    # `should_exit` turns true on the signal. Under another server this is never true.
    server = getattr(signal.getsignal(signal.SIGTERM), "__self__", None)
    return bool(getattr(server, "should_exit", False))
