"""The served agent as a2a-sdk's AgentExecutor: one message of a task, one Run of the agent.

The SDK's request handler calls `execute` for each message of a task (a task's messages one at
a time), in a task of its own, with the task as its store has it. The run is /assist's own Run:
the same time limit, shutdown grace and pause sealer; its events go to the task through
`TaskAnswer` (answer.py). A run belongs to the request that started it: the request's place
under ASSIST_MAX_STREAMS (server/admission.py's `Place`) is held until both have ended. A run whose client left
(a stream dropped, or `returnImmediately`) goes on, as A2A has tasks outlive their connections:
GetTask and SubscribeToTask find what it did, CancelTask stops it, and its time limit ends it.
"""

from __future__ import annotations

import asyncio
import logging

from a2a.helpers import new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.cluster import StoredTask, VersionedTaskStore
from a2a.server.context import ServerCallContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskStore, TaskUpdater
from a2a.types.a2a_pb2 import Task, TaskState, TaskStatus
from fastapi import HTTPException
from ulid import ULID

from sentient_assist.protocol.events import ResponseEvent
from sentient_assist.protocol.request import Query
from sentient_assist.runtime.errors import InputError
from sentient_assist.runtime.run import Run, RunOutcome, RunStats
from sentient_assist.runtime.run_input import RunInput
from sentient_assist.server import metrics
from sentient_assist.server.a2a.answer import TaskAnswer
from sentient_assist.server.a2a.conversation import (
    METADATA_KEY,
    earlier_of,
    prompt_of,
    session_of,
)
from sentient_assist.server.a2a.stores import MAX_CONTEXT_TASKS
from sentient_assist.server.admission import STATE_PLACE, Place
from sentient_assist.server.service import Service

# The least time between two sends of a run's events to its task (bench/README.md, "/a2a").
UPDATE_INTERVAL_SECONDS = 0.02
# Where a request's place and id travel, from the route to the executor (ServerCallContext.state).
STATE_REQUEST_ID = "assist_request_id"

logger = logging.getLogger("sentient_assist.server")


class AgentRunExecutor(AgentExecutor):
    """Runs the agent of `service` for each message of a task."""

    def __init__(self, service: Service, store: TaskStore | VersionedTaskStore) -> None:
        self.service = service
        self.store = store  # the face's: the context's earlier tasks are read from it
        self._runs: dict[str, Run[ResponseEvent]] = {}  # by task id: the run CancelTask stops
        self._canceled: set[str] = set()  # the tasks CancelTask ended: their status is written already

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        service, agent = self.service, self.service.agent
        task_id, context_id = context.task_id or "", context.context_id or ""
        updater = TaskUpdater(event_queue, task_id, context_id)
        call_context = context.call_context
        current = context.current_task
        if current is None:
            # A new task in a context: the context's earlier tasks are the conversation so far.
            earlier = [t for t in await self._in_context(context_id, call_context) if t.id != task_id]
            if context.message is not None:
                submitted = TaskStatus(state=TaskState.TASK_STATE_SUBMITTED)
                task = Task(id=task_id, context_id=context_id, status=submitted, history=[context.message])
                if earlier:
                    task.metadata.update({METADATA_KEY: {"earlier": [t.id for t in earlier]}})
                await event_queue.enqueue_event(task)
        else:
            earlier = await self._tasks(earlier_of(current), call_context)
        try:
            prompt = prompt_of(context.message)
            session = session_of(
                current, agent.name, earlier, max_bytes=service.max_body_bytes, hold=service.histories.hold
            )
        except (InputError, HTTPException) as refused:
            # A2A has no refusal that leaves a task as it was: the message is rejected, its reason
            # the text (a field to fix, or ASSIST_MAX_HISTORY_BYTES_TOTAL reached: retry shortly).
            reason = refused.message if isinstance(refused, InputError) else str(refused.detail)
            await updater.reject(updater.new_agent_message([new_text_part(reason)]))
            return
        state = context.call_context.state
        place: Place | None = state.get(STATE_PLACE)
        stats = RunStats(state.get(STATE_REQUEST_ID) or str(ULID()))
        # Its pauses are answered in this context, under this key, alone.
        run_input = RunInput(thread=context_id, caller="" if place is None else place.owner)
        run: Run[ResponseEvent] = Run(
            agent,
            session,
            Query(id=ULID(), prompt=prompt),
            watcher=service.streams,
            stats=stats,
            sealer=service.sealer,
            run_input=run_input,
        )
        del session
        self._runs[task_id] = run
        if place is not None:
            place.started(run)
        answer = TaskAnswer(updater)
        try:
            await updater.start_work()
            async for batch in run.batches():
                await answer.write(batch)
                # What the agent sends meanwhile goes in the next update: a model's tokens come one
                # at a time, and each update costs the SDK far more than a frame costs /assist.
                await asyncio.sleep(UPDATE_INTERVAL_SECONDS)
            if task_id not in self._canceled:  # else CancelTask wrote its status
                # The agent raised, timed out or was cut by the shutdown: its task failed, answer or not.
                await answer.finish(
                    run_failed=stats.agent_failed or stats.timed_out or stats.outcome is RunOutcome.SHUTDOWN
                )
        finally:
            if self._runs.get(task_id) is run:
                del self._runs[task_id]
            self._canceled.discard(task_id)
            run.reader_left()
            metrics.observe_stream(stats)
            if place is not None:
                place.ended(run)

    async def _in_context(self, context_id: str, call_context: ServerCallContext) -> list[Task]:
        in_context = getattr(self.store, "in_context", None)
        return list(await in_context(context_id, call_context)) if in_context is not None and context_id else []

    async def _tasks(self, ids: list[str], call_context: ServerCallContext) -> list[Task]:
        tasks = []
        for task_id in ids[-MAX_CONTEXT_TASKS:]:
            found = await self.store.get(task_id, call_context)
            if isinstance(found, StoredTask):
                found = found.task
            if found is not None:
                tasks.append(found)
        return tasks

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        """CancelTask: the task's run ends now (the SDK then cancels `execute`), the task canceled."""
        run = self._runs.get(context.task_id or "")
        if run is not None:
            self._canceled.add(context.task_id or "")
            logger.info("A2A task canceled by its client (request %s)", run.stats.request_id)
            run.stop(outcome=RunOutcome.DISCONNECTED)
        updater = TaskUpdater(event_queue, context.task_id or "", context.context_id or "")
        await updater.cancel()
