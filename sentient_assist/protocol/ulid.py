"""ULID field types: the 26-character Crockford base32 string, and nothing else."""

import re
from typing import Annotated, TypeGuard

from pydantic import Field, PlainSerializer, PlainValidator, WithJsonSchema
from ulid import ULID

ULID_PATTERN = "^[0-7][0-9A-HJKMNP-TV-Za-hjkmnp-tv-z]{25}$"
_ULID_RE = re.compile(ULID_PATTERN[1:-1])  # used with fullmatch: "$" would let a final newline through
_JSON_SCHEMA = {
    "type": "string",
    "pattern": ULID_PATTERN,
    "minLength": 26,
    "maxLength": 26,
    "examples": ["01JDQ4Z8M7T3V5X9A2B4C6D8EF"],
}
_MESSAGE = "must be a ULID: a string of 26 Crockford base32 characters"


def is_ulid(value: object) -> TypeGuard[str]:
    return isinstance(value, str) and _ULID_RE.fullmatch(value) is not None


def _to_ulid(value: object) -> ULID:
    if isinstance(value, ULID):
        return value
    if not is_ulid(value):
        raise ValueError(_MESSAGE)
    return ULID.from_str(value.upper())


def _to_ulid_str(value: object) -> str:
    if isinstance(value, ULID):
        return str(value)
    if not is_ulid(value):
        raise ValueError(_MESSAGE)
    return value.upper()


# A ULID object, as the 0.3.0 package hands ids to agents (query.id, session.activity_id).
Ulid = Annotated[
    ULID,
    PlainValidator(_to_ulid),
    PlainSerializer(str, return_type=str),
    WithJsonSchema(_JSON_SCHEMA),
]

# A ULID kept as its string, as event ids travel on the wire.
UlidStr = Annotated[str, PlainValidator(_to_ulid_str), WithJsonSchema(_JSON_SCHEMA)]


def _to_event_id(value: object) -> str:
    # As in the 0.3.0 models, an event that comes without an id gets a fresh one.
    if value is None:
        return str(ULID())
    return _to_ulid_str(value)


# An event id: a ULID string. None until a hook stamps it; a parsed event without one gets a fresh one.
EventId = Annotated[
    str | None, PlainValidator(_to_event_id), WithJsonSchema(_JSON_SCHEMA), Field(validate_default=True)
]
