"""Face: the base of every protocol face -- an adapter, nothing more.

A face parses its protocol's request into what the agent's run takes, encodes the run's events
into its wire format, and renders a refusal in its protocol's shape. What every face shares is
done once, elsewhere: admission and the place a request holds (server/admission.py), the run,
its time limit, keepalives and shutdown grace (runtime/run.py, server/open_streams.py), the
reader that writes it to the client (server/event_stream.py), the access log, the spans and
the metrics. CONTRIBUTING.md says how to add one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import cached_property
from typing import Any, ClassVar

from fastapi import APIRouter, Request, Security
from fastapi.params import Depends
from starlette.responses import Response

from sentient_assist.protocol.request import Query
from sentient_assist.runtime.channel import Channel
from sentient_assist.runtime.run import ChannelHook, RunStats
from sentient_assist.runtime.run_input import NO_RUN_INPUT, RunInput
from sentient_assist.runtime.session import Session
from sentient_assist.server.admission import AdmittedRoute, KeyedRoute, caller_of, run_stats_for
from sentient_assist.server.auth import BEARER_SCHEME
from sentient_assist.server.event_stream import PendingRun, SseHook
from sentient_assist.server.service import Service

# The refusals every face's routes may answer before the face sees the request (callers.py, service.py).
CALLER_RESPONSES: dict[int | str, dict[str, Any]] = {
    403: {"description": "The request comes from a page of an origin ASSIST_CORS_ORIGINS does not name."},
    421: {"description": "The Host header names neither this service nor one in ASSIST_ALLOWED_HOSTS."},
}
BODY_RESPONSES: dict[int | str, dict[str, Any]] = {
    415: {"description": "The body is not JSON by its Content-Type: send Content-Type: application/json."},
}


class Face:
    """A face of `service`'s agent. Subclasses set `title`, build their routes in `router()`
    with `add_route`, and override `refusal` to answer refusals in their protocol's shape."""

    title: ClassVar[str] = "a face"  # as the logs name it: "MCP", "A2A"
    # The protocol's SDK reads the body itself: it is handed the body whole (bounded), and the
    # answer, written by the SDK, is bounded by the time limit.
    reads_body_whole: ClassVar[bool] = False

    def __init__(self, service: Service) -> None:
        self.service = service
        self.agent = service.agent

    def router(self, path: str) -> APIRouter:
        raise NotImplementedError

    def refusal(self, refused: Exception) -> Response | None:
        """`refused` (an HTTPException of admission, FastAPI's validation error, the face's own
        input error, a dependency's refusal) in the protocol's shape; None: the app's exception
        handlers answer it, as for any route (an InputError as an HTTPException of its status,
        `{"detail": "field: reason"}`)."""
        return None

    def method_not_allowed(self, allowed: set[str]) -> Response | None:
        """The answer to a method the route does not take; None: FastAPI's 405."""
        return None

    @property
    def security(self) -> list[Depends]:
        """The dependencies that show the key in OpenAPI (and /docs' Authorize button); the key
        itself is checked by the route, before the body is read."""
        return [Security(BEARER_SCHEME)] if self.service.keys else []

    @cached_property
    def admitted_route(self) -> type[AdmittedRoute]:
        """The route class of this face's routes that may run the agent."""
        return type(f"{type(self).__name__}Route", (AdmittedRoute,), {"face": self})

    @cached_property
    def keyed_route(self) -> type[KeyedRoute]:
        """The route class of this face's routes that only need the key."""
        return type(f"{type(self).__name__}KeyedRoute", (KeyedRoute,), {"face": self})

    def add_route(
        self,
        router: APIRouter,
        path: str,
        endpoint: Callable[..., Any],
        *,
        methods: Sequence[str] = ("POST",),
        admitted: bool = True,
        **options: Any,
    ) -> None:
        """`endpoint` at `path` in `router`, admitted (or only keyed), OpenAPI showing the key and
        the refusals of admission."""
        refusals = {**CALLER_RESPONSES, **(BODY_RESPONSES if admitted and "POST" in methods else {})}
        options["responses"] = {**refusals, **options.get("responses", {})}
        router.add_api_route(
            path,
            endpoint,
            methods=list(methods),
            dependencies=[*self.security, *options.pop("dependencies", [])],
            route_class_override=self.admitted_route if admitted else self.keyed_route,
            **options,
        )

    def run_stats(self, request: Request) -> RunStats:
        """The stats of the run this request starts (the access log and the metrics read them)."""
        return run_stats_for(request, self.agent.name)

    def pending_run(
        self,
        request: Request,
        session: Session,
        query: Query,
        make_hook: Callable[[Channel[bytes], RunStats], ChannelHook[bytes]] = SseHook,
        run_input: RunInput = NO_RUN_INPUT,
    ) -> PendingRun:
        """The run of the service's agent for `query` (and what else the face parsed of the
        request: `run_input`), to start when its response is sent (`EventStream(...)`, say), its
        events encoded by `make_hook` into the face's wire format."""
        service = self.service
        stats = self.run_stats(request)
        caller = caller_of(request.scope)
        if caller != run_input.caller:
            run_input = replace(run_input, caller=caller)  # its pauses answer to this key alone
        return PendingRun(service.agent, session, query, stats, service.streams, make_hook, service.sealer, run_input)
