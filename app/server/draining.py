"""Whether the server is draining: SIGTERM received, finishing what it has, taking nothing new."""

from sse_starlette.sse import AppStatus


def is_draining() -> bool:
    # sse-starlette hooks uvicorn's exit handler and raises this flag on SIGTERM/SIGINT.
    return bool(AppStatus.should_exit)
