"""The id that ties a request's response, logs and error details together."""

import re

from ulid import ULID

REQUEST_ID_HEADER = "X-Request-ID"
_ACCEPTABLE = re.compile(r"[A-Za-z0-9._:\-]{1,128}")


def request_id_from(header_value: str | None) -> str:
    """The caller's `X-Request-ID` when it is a sane token, else a fresh ULID."""
    if header_value and _ACCEPTABLE.fullmatch(header_value):
        return header_value
    return str(ULID())
