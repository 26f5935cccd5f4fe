"""The in-memory A2A task store counts the memory it holds (issue 40): it held parsed protobufs
and counted their ByteSize(), a thirtieth of what they took (5.3 MB of tasks raised RSS by
162 MB). It holds each task's bytes now; Python's own allocation tracer measures what it holds."""

from __future__ import annotations

import gc
import tracemalloc

from a2a.helpers import new_text_artifact, new_text_message
from a2a.server.context import ServerCallContext
from a2a.types.a2a_pb2 import ListTasksRequest, Role, Task, TaskState, TaskStatus

from sentient_assist.server.a2a.stores import BoundedTaskStore, KeyUser

TASKS = 200


def a_task(index: int) -> Task:
    """A task as the face makes them: a message in, a few artifacts of text out."""
    task = Task(
        id=f"task-{index}",
        context_id=f"context-{index}",
        status=TaskStatus(state=TaskState.TASK_STATE_COMPLETED),
        history=[new_text_message(f"question {index} " * 20, role=Role.ROLE_USER)],
    )
    task.status.timestamp.GetCurrentTime()
    for part in range(20):
        task.artifacts.append(new_text_artifact(f"part-{part}", f"token {part} " * 10))
    return task


async def test_what_the_in_memory_store_counts_is_the_memory_it_holds() -> None:
    store = BoundedTaskStore(3600, max_tasks_per_key=10_000, max_bytes_per_key=1 << 30)
    context = ServerCallContext(user=KeyUser(""))
    tasks = [a_task(index) for index in range(TASKS)]
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for task in tasks:
            await store.save(task, context)
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    protobuf_bytes = sum(task.ByteSize() for task in tasks)
    # What it counts covers what it holds, and is not far above it: no factor of thirty unseen.
    assert protobuf_bytes < held <= store.bytes <= 2 * held, (protobuf_bytes, held, store.bytes)
    # And what it holds is read back whole; a page is parsed alone.
    page = await store.list(ListTasksRequest(page_size=1), context)
    assert page.total_size == TASKS and page.tasks[0] == tasks[int(page.tasks[0].id.split("-")[1])]
