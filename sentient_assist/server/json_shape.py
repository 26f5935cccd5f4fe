"""A bound on the shape of a JSON body, checked before a protocol's SDK parses it: what a pure
Python parser (protobuf's `ParseDict`, a2a-sdk's validation of required fields) costs grows with
the number of values, about 20 us each, so a 1 MB body of `[{},{},...]` held the event loop for
10 s. The body is read once in C (orjson) and walked, stopping at the first value past a bound."""

from __future__ import annotations

import orjson

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
