"""A bound on the shape of a JSON body, checked before a protocol's SDK parses it: what a pure
Python parser (protobuf's `ParseDict`, a2a-sdk's validation of required fields) costs grows with
the number of values, about 20 us each, so a 1 MB body of `[{},{},...]` held the event loop for
10 s. The body is read once in C (orjson) and walked, stopping at the first value past a bound."""

from __future__ import annotations

import math

import orjson

from sentient_assist.protocol.events import dumps_json
from sentient_assist.runtime.errors import InputError

# Enough for any message a person or an agent sends (a few parts, a little metadata); 2,000
# values cost the SDK about 45 ms of CPU, the most one request may hold the loop for.
MAX_JSON_VALUES = 2_000
MAX_JSON_DEPTH = 20


def check_json_shape(raw: bytes, *, max_values: int = MAX_JSON_VALUES, max_depth: int = MAX_JSON_DEPTH) -> None:
    """InputError, naming where, when `raw` holds more than `max_values` JSON values or nests
    deeper than `max_depth`; nothing when it is not JSON at all (the SDK answers for that)."""
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return
    check_value_shape(value, max_values=max_values, max_depth=max_depth)


def check_value_shape(value: object, *, max_values: int = MAX_JSON_VALUES, max_depth: int = MAX_JSON_DEPTH) -> None:
    """`check_json_shape` of a value read already."""
    count = 0
    stack: list[tuple[object, str, int]] = [(value, "", 0)]
    while stack:
        item, where, depth = stack.pop()
        count += 1
        if count > max_values:
            raise InputError(where or "body", f"the request holds more than {max_values} JSON values")
        if depth > max_depth:
            raise InputError(where or "body", f"nested more than {max_depth} levels deep")
        if isinstance(item, dict | list) and count + len(stack) + len(item) > max_values:
            raise InputError(where or "body", f"the request holds more than {max_values} JSON values")
        if isinstance(item, dict):
            stack.extend((child, f"{where}.{key}" if where else str(key), depth + 1) for key, child in item.items())
        elif isinstance(item, list):
            stack.extend((child, f"{where}[{index}]", depth + 1) for index, child in enumerate(item))


# orjson's own bound; a state nested deeper is no one's, and the standard encoder would take
# about 120 ms more for a 1 MB body of it.
MAX_KEPT_DEPTH = 255


def compact_json(value: object, where: str) -> str:
    """`value`, read from a request, as compact JSON text to keep for a run (about a twentieth
    of what it takes as Python objects); InputError naming `where` when it nests deeper than
    MAX_KEPT_DEPTH. orjson first (about fifty times the standard encoder's speed on
    `[{},{},...]`); the standard encoder for what orjson refuses otherwise (an integer past 64
    bits, a lone surrogate). NaN and Infinity, which JSON has not, are written as null either
    way, as a browser's JSON.stringify writes them."""
    try:
        return orjson.dumps(value).decode()
    except orjson.JSONEncodeError as refused:
        if "recursion" in str(refused).lower():
            raise InputError(where, f"nested more than {MAX_KEPT_DEPTH} levels deep") from None
    if _nests_past(value, MAX_KEPT_DEPTH):  # what orjson refused came before the depth
        raise InputError(where, f"nested more than {MAX_KEPT_DEPTH} levels deep")
    try:
        return dumps_json(value)
    except ValueError:  # a NaN beside what orjson refuses
        return dumps_json(_finite(value))


def _nests_past(value: object, limit: int) -> bool:
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            item = list(item.values())
        if isinstance(item, list):
            if depth >= limit:
                return True
            stack.extend((child, depth + 1) for child in item)
    return False


def _finite(value: object) -> object:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, list):
        return [_finite(item) for item in value]
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    return value
