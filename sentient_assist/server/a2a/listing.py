"""ListTasks over what a store knows of each task without reading it: its id, context, state and
status time (`Listed`, a few dozen bytes). The filters, the order and the page token are
a2a-sdk's in-memory store's (newest status first, then by id; the token names the last task of
a page), so that a client pages the same way through either store; only the page's own tasks
are then read and parsed, never every task of the key.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from a2a.types.a2a_pb2 import ListTasksRequest, Task
from a2a.utils.constants import DEFAULT_LIST_TASKS_PAGE_SIZE
from a2a.utils.errors import InvalidParamsError
from a2a.utils.task import ListTasksCursor, decode_list_tasks_cursor, decode_page_token, encode_list_tasks_cursor


@dataclass(frozen=True, slots=True)
class Listed:
    """What listing needs of a task: never its contents."""

    id: str
    context_id: str
    state: int
    timestamp_ns: int | None  # its status's time; None without one (listed last)

    @classmethod
    def of(cls, task: Task) -> Listed:
        stamped = task.HasField("status") and task.status.HasField("timestamp")
        stamp = task.status.timestamp.ToNanoseconds() if stamped else None
        return cls(task.id, task.context_id, int(task.status.state), stamp)

    def sort_key(self) -> tuple[bool, int, str]:
        return (self.timestamp_ns is not None, self.timestamp_ns or 0, self.id)


@dataclass(frozen=True, slots=True)
class Page:
    ids: list[str]  # the page's tasks, in order
    next_page_token: str | None
    total_size: int
    page_size: int


def page_of(tasks: Iterable[Listed], params: ListTasksRequest) -> Page:
    """The ids of the page `params` asks for, among `tasks` (one key's)."""
    found = list(tasks)
    if params.context_id:
        found = [task for task in found if task.context_id == params.context_id]
    if params.status:
        found = [task for task in found if task.state == params.status]
    if params.HasField("status_timestamp_after"):
        after_ns = params.status_timestamp_after.ToNanoseconds()
        found = [task for task in found if task.timestamp_ns is not None and task.timestamp_ns >= after_ns]
    found.sort(key=Listed.sort_key, reverse=True)
    total = len(found)
    start = 0
    if params.page_token:
        cursor = decode_list_tasks_cursor(params.page_token)
        if cursor is None:  # a token of the SDK's older form: the id of the page's first task
            first = decode_page_token(params.page_token)
            start = next((i for i, task in enumerate(found) if task.id == first), -1)
            if start < 0:
                raise InvalidParamsError(f"Invalid page token: {params.page_token}")
        else:
            after = cursor.sort_key()
            start = next((i for i, task in enumerate(found) if task.sort_key() < after), total)
    size = params.page_size or DEFAULT_LIST_TASKS_PAGE_SIZE
    end = start + size
    token = None
    if end < total:
        last = found[end - 1]
        token = encode_list_tasks_cursor(ListTasksCursor(timestamp_ns=last.timestamp_ns, task_id=last.id))
    return Page([task.id for task in found[start:end]], token, total, size)
