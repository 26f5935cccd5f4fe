"""The frames that end a resumed stream whose run cannot go on being followed (its replica
died, the store stopped answering): `error`, then `done`, with ids that follow the last one."""

from __future__ import annotations

from ulid import ULID

from sentient_assist.protocol.events import DoneEvent, ErrorContent, ErrorEvent
from sentient_assist.protocol.ulid import is_ulid
from sentient_assist.runtime.ids import MonotonicUlid

LOST_MESSAGE = "The run was lost: the replica running it stopped answering. Ask again."
STORE_LOST_MESSAGE = "The run cannot be followed any further: its buffer (Redis) stopped answering. Ask again."
LOST_CODE = 503


def next_ids(last_id: str | None, count: int) -> list[str]:
    """`count` ids, each greater than `last_id` (the one after it, and so on) whatever the clock
    of this replica says: another replica's clock may be ahead."""
    if last_id is None or not is_ulid(last_id):
        make = MonotonicUlid()
        return [make() for _ in range(count)]
    start = int(ULID.from_str(last_id.upper()))
    return [str(ULID.from_int(start + offset)) for offset in range(1, count + 1)]


def closing_frames(last_id: str | None, source: str, message: str, reason: str) -> list[tuple[str, bytes]]:
    """(id, frame) of the `error` and the `done` that end a stream."""
    error_id, done_id = next_ids(last_id, 2)
    error = ErrorEvent(
        source=source, content=ErrorContent(error_message=message, error_code=LOST_CODE, details={"lost": reason})
    )
    error.id = error_id
    done = DoneEvent(source=source)
    done.id = done_id
    return [(error_id, error.sse_frame()), (done_id, done.sse_frame())]


def ulid_ms(event_id: str) -> int:
    """The millisecond a ULID was made in (its first 48 bits)."""
    return int(ULID.from_str(event_id.upper()).milliseconds)
