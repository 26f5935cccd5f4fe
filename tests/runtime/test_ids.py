"""MonotonicUlid: strictly increasing event ids that stay on the wall clock."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator

import pytest
from ulid import ULID

from sentient_assist.protocol.ulid import is_ulid
from sentient_assist.runtime.ids import MonotonicUlid

MANY = 100_000
FROZEN_NS = 1_750_000_000_123_456_789
FROZEN_MS = FROZEN_NS // 1_000_000


def milliseconds(ulid: str) -> int:
    return ULID.from_str(ulid).milliseconds


def random_part(ulid: str) -> int:
    return int.from_bytes(ULID.from_str(ulid).bytes[6:], "big")


def assert_strictly_increasing(ids: list[str]) -> None:
    assert all(a < b for a, b in itertools.pairwise(ids))


def set_clock(monkeypatch: pytest.MonkeyPatch, readings: Iterator[int]) -> None:
    monkeypatch.setattr("sentient_assist.runtime.ids.time.time_ns", lambda: next(readings))


def freeze_clock(monkeypatch: pytest.MonkeyPatch, ns: int = FROZEN_NS) -> None:
    monkeypatch.setattr("sentient_assist.runtime.ids.time.time_ns", lambda: ns)


def test_many_ids_in_a_tight_loop_increase_and_keep_to_the_wall_clock():
    next_id = MonotonicUlid()
    stamped = [(next_id(), time.time() * 1000) for _ in range(MANY)]
    ids = [ulid for ulid, _ in stamped]
    assert_strictly_increasing(ids)
    assert all(len(ulid) == 26 and is_ulid(ulid) for ulid in ids)
    assert all(abs(milliseconds(ulid) - now) <= 1000 for ulid, now in stamped)


def test_ids_are_valid_ulids_of_uppercase_crockford_base32():
    ulid = MonotonicUlid()()
    assert str(ULID.from_str(ulid)) == ulid


def test_two_generators_are_independent(monkeypatch):
    freeze_clock(monkeypatch)
    first, second = MonotonicUlid(), MonotonicUlid()
    a = first()
    others = [second() for _ in range(10)]
    b = first()
    # The other generator's calls do not advance this one: b is a's successor.
    assert random_part(b) == random_part(a) + 1
    assert_strictly_increasing(others)
    assert random_part(others[0]) != random_part(a)


def test_same_millisecond_increments_the_random_part(monkeypatch):
    freeze_clock(monkeypatch)
    next_id = MonotonicUlid()
    ids = [next_id() for _ in range(1000)]
    assert_strictly_increasing(ids)
    assert {milliseconds(ulid) for ulid in ids} == {FROZEN_MS}
    assert [random_part(ulid) - random_part(ids[0]) for ulid in ids] == list(range(1000))


def test_new_millisecond_takes_the_new_time(monkeypatch):
    set_clock(monkeypatch, iter([FROZEN_NS, FROZEN_NS + 3_000_000]))
    next_id = MonotonicUlid()
    assert [milliseconds(next_id()) for _ in range(2)] == [FROZEN_MS, FROZEN_MS + 3]


def test_ids_increase_when_the_clock_goes_backwards(monkeypatch):
    set_clock(monkeypatch, (FROZEN_NS - step * 5_000_000 for step in range(1000)))
    next_id = MonotonicUlid()
    ids = [next_id() for _ in range(1000)]
    assert_strictly_increasing(ids)
    # The time part stays at the latest time seen; it neither goes back nor runs ahead.
    assert {milliseconds(ulid) for ulid in ids} == {FROZEN_MS}


def test_random_part_overflow_moves_to_the_next_millisecond(monkeypatch):
    freeze_clock(monkeypatch)
    next_id = MonotonicUlid()
    first = next_id()
    next_id._set_random(2**80 - 1)
    overflowed, after = next_id(), next_id()
    assert first < overflowed < after
    assert (milliseconds(overflowed), random_part(overflowed)) == (FROZEN_MS + 1, 0)
    assert (milliseconds(after), random_part(after)) == (FROZEN_MS + 1, 1)


def test_largest_random_part_stays_in_its_millisecond(monkeypatch):
    freeze_clock(monkeypatch)
    next_id = MonotonicUlid()
    first = next_id()
    next_id._set_random(2**80 - 2)
    largest = next_id()
    assert first < largest
    assert largest.endswith("Z" * 16)
    assert milliseconds(largest) == FROZEN_MS
