"""The id that ties a request's response, logs and error details together."""

import re

from starlette.requests import HTTPConnection
from ulid import ULID

REQUEST_ID_HEADER = "X-Request-ID"
STATE_REQUEST_ID = "request_id"
_ACCEPTABLE = re.compile(r"[A-Za-z0-9._:\-]{1,128}")


def request_id_from(header_value: str | None) -> str:
    """The caller's `X-Request-ID` when it is a sane token, else a fresh ULID."""
    if header_value and _ACCEPTABLE.fullmatch(header_value):
        return header_value
    return str(ULID())


def request_id_of(connection: HTTPConnection) -> str:
    """The request's id: the one the access log gave it, else (no access log in this app) its own."""
    state = connection.scope.setdefault("state", {})
    if STATE_REQUEST_ID not in state:
        state[STATE_REQUEST_ID] = request_id_from(connection.headers.get(REQUEST_ID_HEADER))
    request_id: str = state[STATE_REQUEST_ID]
    return request_id
