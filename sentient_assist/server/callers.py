"""Which web pages and host names a face answers: checked for every request to a face, before
its key.

A browser says which page a request comes from (`Origin`), and sends one for every POST a page
makes, even one it lets through without a preflight (a "simple" request, `text/plain`). A page
of an origin the operator did not name (ASSIST_CORS_ORIGINS) is refused (403), unless it is the
service's own page (the playground): an origin naming the very host the request was sent to.

A page can also reach a service on loopback under a name of its own (DNS rebinding: its name
resolves to 127.0.0.1, so the page and the service look like one origin). So a request that
came in on a loopback address must name a loopback host (localhost, 127.0.0.1, [::1]) or one
the operator allows (ASSIST_ALLOWED_HOSTS, and ASSIST_PUBLIC_URL's), else 421; with
ASSIST_ALLOWED_HOSTS set, every request must name one of them. MCP's specification asks this of
its servers; here every face does it. Requests without `Origin` (curl, the SDKs, servers) pass
the first check, and any `Host` passes the second on an address that is not loopback (a
container's, a pod's) unless ASSIST_ALLOWED_HOSTS is set.
"""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import Iterable
from urllib.parse import urlsplit

from fastapi import HTTPException
from starlette.types import Scope

LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "[::1]"})
NOT_ALLOWED_ORIGIN = "a page of this origin may not call the service: ASSIST_CORS_ORIGINS names the origins that may"
NOT_ALLOWED_HOST = (
    "the Host header does not name this service: on loopback it answers to localhost, 127.0.0.1 and"
    " [::1]; ASSIST_ALLOWED_HOSTS names the others"
)


class Callers:
    """The origins and host names of the requests a service's faces answer."""

    __slots__ = ("_origins", "_any_origin", "_hosts", "_only_allowed")

    def __init__(self, origins: Iterable[str], hosts: Iterable[str], public_url: str | None = None) -> None:
        self._origins = frozenset(origin.rstrip("/").lower() for origin in origins)
        self._any_origin = "*" in self._origins
        allowed = {host_name(host) for host in hosts}
        self._only_allowed = bool(allowed)  # ASSIST_ALLOWED_HOSTS set: every request names one
        if public_url:
            allowed.add(host_name(urlsplit(public_url).netloc))
        self._hosts = frozenset(allowed | LOOPBACK_HOSTS)

    def check(self, scope: Scope) -> None:
        """Pass a request from an allowed page (or none) to an allowed host name; else 403, 421."""
        host = origin = None
        for name, value in scope["headers"]:
            if name == b"host":
                host = value
            elif name == b"origin":
                origin = value
        if host is not None and (self._only_allowed or _on_loopback(scope.get("server"))):
            if host_name(host.decode("latin-1")) not in self._hosts:
                raise HTTPException(421, NOT_ALLOWED_HOST)
        if origin is not None and not self._any_origin:
            page = origin.decode("latin-1").rstrip("/").lower()
            if page not in self._origins and not _same_host(page, host):
                raise HTTPException(403, NOT_ALLOWED_ORIGIN)


def host_name(host: str) -> str:
    """The name of a `Host` header's value (or a URL's netloc), without its port, in lower case."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[: host.find("]") + 1] if "]" in host else host
    return host.partition(":")[0]


def _same_host(origin: str, host: bytes | None) -> bool:
    """Whether a page's origin is the service's own: the host (and port) it sent the request to."""
    if host is None:
        return False
    _, _, netloc = origin.partition("://")
    return bool(netloc) and netloc == host.decode("latin-1").strip().lower()


@functools.lru_cache(maxsize=64)
def _loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def _on_loopback(server: tuple[str, int | None] | None) -> bool:
    # A Unix socket's (no port) is no address a page can rebind a name to.
    return server is not None and server[1] is not None and _loopback(server[0])
