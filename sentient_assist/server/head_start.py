"""HeadStartMiddleware: a request that arrives while a run's agent has not yet taken its first
step waits for it at the app's door, before any middleware's work (runtime/head_start.py).

Admission (`Service.admit`) takes the same turn, so a route added to an app of the user's
(`add_routes`) has its head start too; here it comes sooner. Of four requests that arrive
together, the three behind the first went through the access log, the router and the route
(about 0.15 ms each after an idle moment) before the first one's agent sent its model request;
at the door they wait for it first (bench/README.md, "A real model"). What a request waits
for is one step of each run ahead of it, never anything a client sends.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from sentient_assist.runtime.head_start import HeadStart


class HeadStartMiddleware:
    """Each HTTP request takes its turn behind the runs of `head_start` still starting, then goes on."""

    __slots__ = ("app", "head_start")

    def __init__(self, app: ASGIApp, head_start: HeadStart) -> None:
        self.app = app
        self.head_start = head_start

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            await self.head_start.turn()
        await self.app(scope, receive, send)
