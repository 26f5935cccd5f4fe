"""Monotonic ULIDs: strictly increasing event ids that stay on the wall clock.

Within one millisecond the 80-bit random part is incremented rather than the
time pushed forward, so ids keep to the wall clock however fast events come
(the 0.3.0 package adds 10 ms per collision and drifts minutes ahead).
"""

import random
import time

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
# Two base32 characters for every 10-bit value: half the lookups of one per character.
_PAIRS = [a + b for a in _CROCKFORD for b in _CROCKFORD]
_RANDOM_BITS = 80
_RANDOM_MASK = (1 << _RANDOM_BITS) - 1
_LOW_MASK = (1 << 40) - 1


def _encode_time(ms: int) -> str:
    p = _PAIRS
    return p[ms >> 40] + p[(ms >> 30) & 1023] + p[(ms >> 20) & 1023] + p[(ms >> 10) & 1023] + p[ms & 1023]


class MonotonicUlid:
    """Makes ULID strings, each greater than the one before (one generator per response)."""

    __slots__ = ("_ms", "_time_part", "_high", "_high_part", "_low")

    def __init__(self) -> None:
        self._ms = -1
        self._time_part = ""
        # The 80-bit random part as two 40-bit halves: an increment re-encodes only the low one.
        self._high = 0
        self._high_part = ""
        self._low = 0

    def __call__(self) -> str:
        ms = time.time_ns() // 1_000_000
        if ms > self._ms:
            self._ms = ms
            self._time_part = _encode_time(ms)
            # 79 random bits: room for 2**79 increments before the millisecond could overflow.
            # Python's generator, not os.urandom: an event id must be unique and increasing, not
            # unpredictable, and a system call each millisecond cost a slowly streaming model
            # about half a microsecond per token (the generator is reseeded in a forked child).
            self._set_random(random.getrandbits(79))
        else:
            self._low += 1
            if self._low >> 40:
                self._set_random(((self._high << 40) + self._low) & _RANDOM_MASK)  # carry into the high half
                if self._high == 0 and self._low == 0:  # all 80 bits overflowed: the next millisecond
                    self._ms += 1
                    self._time_part = _encode_time(self._ms)
        low = self._low
        p = _PAIRS
        return (
            self._time_part
            + self._high_part
            + p[low >> 30]
            + p[(low >> 20) & 1023]
            + p[(low >> 10) & 1023]
            + p[low & 1023]
        )

    def _set_random(self, value: int) -> None:
        self._high = value >> 40
        self._low = value & _LOW_MASK
        high = self._high
        p = _PAIRS
        self._high_part = p[high >> 30] + p[(high >> 20) & 1023] + p[(high >> 10) & 1023] + p[high & 1023]
