"""Monotonic ULIDs: strictly increasing event ids that stay on the wall clock.

Within one millisecond the 80-bit random part is incremented rather than the
time pushed forward, so ids keep to the wall clock however fast events come
(the 0.3.0 package adds 10 ms per collision and drifts minutes ahead).
"""

import os
import time

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
# Two base32 characters for every 10-bit value: half the lookups of one per character.
_PAIRS = [a + b for a in _CROCKFORD for b in _CROCKFORD]
_RANDOM_BITS = 80


def _encode_time(ms: int) -> str:
    p = _PAIRS
    return p[ms >> 40] + p[(ms >> 30) & 1023] + p[(ms >> 20) & 1023] + p[(ms >> 10) & 1023] + p[ms & 1023]


def _encode_random(n: int) -> str:
    p = _PAIRS
    return (
        p[n >> 70] + p[(n >> 60) & 1023] + p[(n >> 50) & 1023] + p[(n >> 40) & 1023]
        + p[(n >> 30) & 1023] + p[(n >> 20) & 1023] + p[(n >> 10) & 1023] + p[n & 1023]
    )


class MonotonicUlid:
    """Makes ULID strings, each greater than the one before (one generator per response)."""

    __slots__ = ("_ms", "_time_part", "_random")

    def __init__(self) -> None:
        self._ms = -1
        self._time_part = ""
        self._random = 0

    def __call__(self) -> str:
        ms = time.time_ns() // 1_000_000
        if ms > self._ms:
            self._ms = ms
            self._time_part = _encode_time(ms)
            # 79 random bits: room for 2**79 increments before the millisecond could overflow.
            self._random = int.from_bytes(os.urandom(10), "big") >> 1
        else:
            self._random += 1
            if self._random >> _RANDOM_BITS:
                self._ms += 1
                self._time_part = _encode_time(self._ms)
                self._random = 0
        return self._time_part + _encode_random(self._random)
