"""Whether the server is draining: SIGTERM received, finishing what it has, taking nothing new."""

import signal

from sse_starlette.sse import AppStatus


def is_draining() -> bool:
    # sse-starlette hooks uvicorn's exit handler when it is imported before uvicorn installs
    # its signal handlers (`python -m app serve`); under `uvicorn app.main:app` and with workers
    # the handler is uvicorn's own bound method, whose server says whether it is exiting.
    if AppStatus.should_exit:
        return True
    server = getattr(signal.getsignal(signal.SIGTERM), "__self__", None)
    return bool(getattr(server, "should_exit", False))
