"""What the browser tests share: the browser's path and flags, and a context kept on loopback."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

CHROMIUM = Path("/usr/bin/chromium")
# Only what the tests need: no background requests to Google's services, no GPU, no sandbox
# (CI runs as root, where Chromium's sandbox cannot start).
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
LOOPBACK = {"127.0.0.1", "localhost", "::1", "[::1]"}
API_KEY = "browser-test-key-1"
WIDE = {"width": 1280, "height": 860}
PHONE = {"width": 375, "height": 740}


def browser_missing() -> str | None:
    """Why the browser tests cannot run here, or None."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright package is not installed (pip install -e '.[test]')"
    if not CHROMIUM.exists():
        return f"{CHROMIUM} is missing (apt-get install -y chromium)"
    return None


class Offline:
    """A browser context whose requests stay on loopback; `outside` lists the others it tried."""

    def __init__(self, browser, **options) -> None:
        self.outside: list[str] = []
        self.context = browser.new_context(**options)
        self.context.set_default_timeout(10_000)
        self.context.route("**/*", self._route)
        self.errors: list[str] = []

    def _route(self, route) -> None:
        host = urlsplit(route.request.url).hostname or ""
        if host in LOOPBACK:
            route.continue_()
        else:
            self.outside.append(route.request.url)
            route.abort()

    def page(self):
        page = self.context.new_page()
        page.on("pageerror", lambda error: self.errors.append(str(error)))
        return page
