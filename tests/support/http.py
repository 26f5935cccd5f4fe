"""The tests' one request helper: a POST to a face of a running server, whole or streamed.

post(server, "/agui", run_input(...), key=KEY)                 # an httpx.Response
post(server, "/assist", b"{", content_type="text/plain")       # bytes go as they are
with posting(server, "/assist", new_body("slow")) as response:  # read as it arrives
    for event in iter_events(response): ...
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx

from tests.support.server import RunningServer


def bearer(key: str | None) -> dict[str, str]:
    """The Authorization header of a bearer key; none without one."""
    return {"Authorization": f"Bearer {key}"} if key else {}


def _request(
    server: RunningServer | str,
    path: str,
    body: Any,
    key: str | None,
    headers: dict[str, str] | None,
    content_type: str,
) -> dict[str, Any]:
    url = server if isinstance(server, str) else server.url
    if isinstance(body, (bytes, str)) or hasattr(body, "__next__"):
        content = body  # as given: bytes, text, or chunks
    else:
        # json.dumps with its escapes, so that a lone surrogate goes as `\ud800`, as a client may send it.
        content = json.dumps(body).encode()
    sent = {"Content-Type": content_type, **bearer(key), **(headers or {})}
    return {"url": url + path, "content": content, "headers": sent}


def post(
    server: RunningServer | str,
    path: str,
    body: Any = None,
    *,
    key: str | None = None,
    headers: dict[str, str] | None = None,
    content_type: str = "application/json",
    timeout: float = 30,
    **kwargs: Any,
) -> httpx.Response:
    """POST `body` to `path` on `server` (or a base URL) and read the whole answer: a dict or list
    as JSON; bytes, text or an iterator of bytes as they are. `key` is the bearer key."""
    return httpx.post(**_request(server, path, body, key, headers, content_type), timeout=timeout, **kwargs)


@contextmanager
def posting(
    server: RunningServer | str,
    path: str,
    body: Any = None,
    *,
    key: str | None = None,
    headers: dict[str, str] | None = None,
    content_type: str = "application/json",
    timeout: float = 30,
) -> Iterator[httpx.Response]:
    """The same POST, its answer streamed: read it as it arrives; leaving closes the connection."""
    with httpx.Client(timeout=timeout) as client:
        request = _request(server, path, body, key, headers, content_type)
        with client.stream("POST", request.pop("url"), **request) as response:
            yield response
