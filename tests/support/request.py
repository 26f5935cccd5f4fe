"""The tests' one request helper: a POST to a face of a running server, whole or streamed.

post(server, "/agui", run_input(...), key=KEY)                 # an httpx.Response
post(server, "/assist", b"{", content_type="text/plain")       # bytes go as they are
with posting(server, "/assist", new_body("slow")) as response:  # read as it arrives
    for event in iter_events(response): ...
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import httpx

from tests.support.server import RunningServer


def bearer(key: str | None) -> dict[str, str]:
    """The Authorization header of a bearer key; none without one."""
    return {"Authorization": f"Bearer {key}"} if key else {}


Target = RunningServer | str | httpx.Client


def _request(
    server: Target, path: str, body: Any, key: str | None, headers: dict[str, Any] | None, content_type: str | None
) -> dict[str, Any]:
    url = "" if isinstance(server, httpx.Client) else server if isinstance(server, str) else server.url
    if isinstance(body, (bytes, str)) or hasattr(body, "__next__"):
        content = body  # as given: bytes, text, or chunks
    else:
        # json.dumps with its escapes, so that a lone surrogate goes as `\ud800`, as a client may send it.
        content = json.dumps(body).encode()
    sent = httpx.Headers({"Content-Type": content_type} if content_type else {})
    for more in (bearer(key), headers or {}):
        sent.update(more)  # a name given again, in whatever case, replaces the one before
    return {"url": url + path, "content": content, "headers": sent}


def post(
    server: Target,
    path: str,
    body: Any = None,
    *,
    key: str | None = None,
    headers: dict[str, Any] | None = None,
    content_type: str | None = "application/json",
    timeout: float = 30,
    **kwargs: Any,
) -> httpx.Response:
    """POST `body` to `path` on `server` (or a base URL, or a client's) and read the whole answer: a
    dict or list as JSON; bytes, text or an iterator of bytes as they are. `key` is the bearer key;
    `headers` add to (or replace) Content-Type, which `content_type=None` leaves out."""
    request = _request(server, path, body, key, headers, content_type)
    if isinstance(server, httpx.Client):
        return server.post(**request, **kwargs)
    return httpx.post(**request, timeout=timeout, **kwargs)


@contextmanager
def posting(
    server: Target,
    path: str,
    body: Any = None,
    *,
    key: str | None = None,
    headers: dict[str, Any] | None = None,
    content_type: str | None = "application/json",
    timeout: float = 30,
) -> Iterator[httpx.Response]:
    """The same POST, its answer streamed: read it as it arrives; leaving closes the response."""
    request = _request(server, path, body, key, headers, content_type)
    with ExitStack() as stack:
        client = server if isinstance(server, httpx.Client) else stack.enter_context(httpx.Client(timeout=timeout))
        yield stack.enter_context(client.stream("POST", request.pop("url"), **request))
