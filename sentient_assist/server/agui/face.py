"""The served agent as an AG-UI backend: `POST /agui` takes a `RunAgentInput` and streams the
run as AG-UI events, for CopilotKit, `@ag-ui/client`'s HttpAgent and any other AG-UI front end.

    request -> the app's middleware -> FastAPI's router -> the admitted route (server/admission.py):
    the key (401), the body's size (413), a place under ASSIST_MAX_STREAMS (503) -> FastAPI reads
    and validates the body as ag-ui-protocol's RunAgentInput (422 naming the field) ->
    `AguiFace.run`: the messages -> query and session, a pause resumed (400, 409), the client's
    tools, context and state (400) -> the same Run and EventStream as /assist's, its events read
    by sentient_assist/server/agui/events.py and written by ag-ui-protocol's EventEncoder

It is the same service as /assist, not a second one: the same `Service`'s keys, stream
budget (one ASSIST_MAX_STREAMS for every face), body limits, time limit (a RUN_ERROR, code 504),
keepalive pings (SSE comments, which AG-UI clients skip), disconnect-cancels (an aborted run
ends its agent) and shutdown grace. docs/agui.md has the mapping and every choice made where
AG-UI is silent.
"""

from __future__ import annotations

import sys
from functools import partial
from typing import Any

from ag_ui.core import RunAgentInput
from fastapi import APIRouter, Request

from sentient_assist.protocol.request import MAX_NAME_LENGTH
from sentient_assist.runtime.errors import InputError
from sentient_assist.runtime.pauses import PauseRefused, claim, pause_holder
from sentient_assist.runtime.run_input import ContextItem, RunInput
from sentient_assist.server.admission import caller_of
from sentient_assist.server.agui.events import AguiHook, AguiWriter
from sentient_assist.server.agui.request import conversation_of
from sentient_assist.server.agui.tools import offered_tools
from sentient_assist.server.assist import RESPONSES as ASSIST_RESPONSES
from sentient_assist.server.event_stream import MEDIA_TYPE, EventStream
from sentient_assist.server.face import Face
from sentient_assist.server.json_shape import compact_json

AGUI_PATH = "/agui"

_STREAM_DESCRIPTION = """\
AG-UI events as Server-Sent Events, written by ag-ui-protocol's EventEncoder: one `data:` line
of JSON per event, `RUN_STARTED` first, `RUN_FINISHED` (or `RUN_ERROR`) last. Keepalive pings
are comment lines (`: ping`).
"""
# One SSE event of the stream, in the shape OpenAPI 3.2 gives server-sent events: AG-UI's have no `event:`.
_SSE_EVENT_SCHEMA = {
    "type": "object",
    "properties": {
        "data": {"type": "string", "contentMediaType": "application/json", "description": "An AG-UI event, as JSON."}
    },
    "required": ["data"],
}
RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"content": {MEDIA_TYPE: {"itemSchema": _SSE_EVENT_SCHEMA}}},
    400: {"description": "The input is not a run this agent can answer; `detail` names the field."},
    401: ASSIST_RESPONSES[401],
    408: ASSIST_RESPONSES[408],
    409: {"description": "The interrupt (or client tool call) the input answers was answered before."},
    413: {"description": "The body is larger than ASSIST_MAX_BODY_BYTES."},
    422: {"description": "The body is not an AG-UI RunAgentInput; `detail` names each bad field."},
    503: {"description": "At ASSIST_MAX_STREAMS (every face counts), or shutting down; see `Retry-After`."},
}


class AguiFace(Face):
    """POST /agui for the agent of a service, under its limits."""

    title = "/agui"

    def router(self, path: str = AGUI_PATH) -> APIRouter:
        """A router holding the face's route at `path`; include it in any FastAPI app."""
        router = APIRouter(tags=["AG-UI"])
        self.add_route(
            router,
            path,
            self.run,
            name="agui",
            status_code=200,
            summary="Run the agent as an AG-UI backend (CopilotKit, @ag-ui/client)",
            response_class=EventStream,
            response_description=_STREAM_DESCRIPTION,
            responses=RESPONSES,
        )
        return router

    async def run(self, request: Request, body: RunAgentInput) -> EventStream:
        """The agent's run for this input, streamed as AG-UI events."""
        # Echoed in RUN_STARTED and RUN_FINISHED: names, not texts.
        thread_id, run_id = body.thread_id, body.run_id
        for param, value in (("threadId", thread_id), ("runId", run_id)):
            if len(value) > MAX_NAME_LENGTH:
                raise InputError(param, f"at most {MAX_NAME_LENGTH} characters")
        sealer = self.service.sealer
        holder = pause_holder(caller_of(request.scope), thread_id)
        # The rest of the input, as compact as the history, and counted with it.
        tools = offered_tools(self.agent, body)
        context = tuple(ContextItem(item.description, item.value) for item in body.context or ())
        state = "" if body.state is None else compact_json(body.state, "state")
        forwarded = "" if body.forwarded_props is None else compact_json(body.forwarded_props, "forwardedProps")
        # What the strings take in memory (sys.getsizeof), not their length: text past Latin-1
        # takes 2 or 4 bytes a character.
        texts = [state, forwarded, *(t for item in context for t in (item.description, item.value))]
        texts += [t for tool in tools for t in (tool.name, tool.description, tool.parameters_json)]
        beside = sum(map(sys.getsizeof, texts))
        conversation = conversation_of(body, self.agent.name, sealer, self.service.histories, holder, beside)
        del body  # what the run needs of it is taken
        resumed = conversation.resumed
        if resumed is not None:
            # Claimed before the stream starts: a second answer to one pause is a 409, not a run.
            try:
                resumed = await claim(resumed, sealer)
            except PauseRefused as refused:
                raise InputError(conversation.pause_param or "resume", str(refused), status=refused.status) from None
        run_input = RunInput(
            resumed=resumed,
            offered_tools=tools,
            tool_answers=conversation.answers,
            context=context,
            state_json=state,
            forwarded_props_json=forwarded,
            thread=thread_id,
        )
        writer = AguiWriter(
            thread_id,
            run_id,
            self.agent.name,
            client_tools=frozenset(tool.name for tool in tools),
            answered_calls=frozenset(conversation.answers),
        )
        query = conversation.query
        return EventStream(
            self.pending_run(request, conversation.session, query, partial(AguiHook, writer=writer), run_input)
        )
