"""RouterAgent: serves a routed set of agents at /assist (the rules that route are in rules.py).

router = Router(default=GeneralAgent())
router.add(name="weather", agent=WeatherAgent(), prompt_pattern=r"(?i)\\bweather\\b")
agent = RouterAgent(router)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from sentient_assist.orchestration.calls import CallPolicy, call_agent, current_context, in_a_call, publish_slush
from sentient_assist.orchestration.context import build_context
from sentient_assist.orchestration.forwarding import Forwarder
from sentient_assist.orchestration.rules import Router, request_metadata
from sentient_assist.protocol import conventions as names
from sentient_assist.protocol.conventions import StagePayload
from sentient_assist.protocol.history import messages_from
from sentient_assist.protocol.request import Query
from sentient_assist.runtime.agent import AbstractAgent
from sentient_assist.runtime.errors import CallRefused
from sentient_assist.runtime.response_handler import ResponseHandler
from sentient_assist.runtime.session import Session
from sentient_assist.tracing import current_tracing

NO_ROUTE_CODE = 404


class RouterAgent(AbstractAgent):
    """Serves a routed set of agents: routes each request, says where (`STAGE`), and runs that agent.

    The request's metadata is its CallContext signals (the context call_agent() made when this
    router is itself called, else one built from the prompt and the session's history), with
    the fields `metadata(session, query)` returns, if given, laid over them. The routed agent
    gets the same history and upstream slush, and its events stream through under its own
    source; the slush it publishes becomes the router's. A refused call and a request no rule
    takes (with no default) become error events, never a crash.
    """

    name = "router"
    description = "Sends each request to the agent its rules pick."

    def __init__(
        self,
        router: Router,
        name: str | None = None,
        description: str | None = None,
        *,
        policy: CallPolicy | None = None,
        time_zone: str = "UTC",
        metadata: Callable[[Session, Query], Mapping[str, object]] | None = None,
    ) -> None:
        super().__init__(name)
        if description is not None:
            self.description = description
        self.router = router
        self._policy = policy
        self._time_zone = time_zone
        self._metadata = metadata

    async def assist(self, session: Session, query: Query, response_handler: ResponseHandler) -> None:
        history = messages_from(session.get_interactions())
        # Called by call_agent(), the router takes the context made for its call (and its slush).
        called = current_context() if in_a_call() else None
        context = called or build_context(query.prompt, history, time_zone=self._time_zone, call_chain=(self.name,))
        extra = self._metadata(session, query) if self._metadata is not None else None
        metadata = request_metadata(context, extra)
        sender, channel, groups = _who_and_where(session, extra or {})
        route = self.router.match(
            query.prompt,
            processor_id=session.processor_id,
            metadata=metadata,
            sender=sender,
            channel=channel,
            groups=groups,
        )
        if route is None:
            await self._stage(response_handler, None, "unrouted", None)
            message = f"no rule of {self.name!r} matched the request and it has no default agent"
            await response_handler.emit_error(message, NO_ROUTE_CODE, {"rules": len(self.router)})
            await response_handler.complete()
            return
        await self._stage(response_handler, route.agent_name, "routed", route.reason)
        try:
            call = await call_agent(
                route.agent,
                query.prompt,
                history=history,
                forward=Forwarder(response_handler),
                upstream_slush=context.upstream_slush,
                caller=self.name,
                policy=self._policy,
            )
        except CallRefused as exc:
            await response_handler.emit_error(str(exc), exc.error_code, {"refused": exc.reason})
        else:
            if call.slush is not None and called is not None:
                # In a chain, what the routed agent left goes on to the router's next agent.
                publish_slush(call.slush.signals, call.slush.confidence)
        await response_handler.complete()

    async def _stage(self, handler: ResponseHandler, capability: str | None, outcome: str, reason: str | None) -> None:
        if current_tracing() is not None:  # an event on the router's invoke_agent span
            from sentient_assist.runtime.tracing import add_event

            add_event("sentient.route", {"sentient.route.outcome": outcome, "sentient.route.agent": capability or ""})
        stage = StagePayload(stage="route", phase="end", capability=capability, outcome=outcome, reason=reason)
        await handler.emit_json(names.STAGE, stage)


CHANNEL = "assist"  # the channel of a request that came to /assist


def _who_and_where(session: Session, given: Mapping[str, object]) -> tuple[str | None, str, tuple[str, ...]]:
    """A request's sender, channel and groups, for the rules: the metadata hook's, else the
    sender and the recipients of the chat's last recorded request (as Sentient Chat keeps
    them), and the channel "assist"."""
    interactions = session.get_interactions()
    last = interactions[-1].request if interactions else None
    sender = given.get("sender", last.sender if last is not None else None)
    channel = given.get("channel", CHANNEL)
    groups = given.get("groups", sorted(last.recipients or ()) if last is not None else ())
    return (
        str(sender) if sender is not None else None,
        str(channel),
        tuple(str(g) for g in groups) if isinstance(groups, (list, tuple, set, frozenset)) else (),
    )
