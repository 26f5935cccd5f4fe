"""A headless Chromium (Debian's, never a downloaded one) and the servers it talks to.

Every page runs in a context that lets no request leave loopback: a request to any other host
is aborted and recorded, and a test whose page tried one (or threw) fails."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.browser.support import API_KEY, CHROMIUM, CHROMIUM_ARGS, WIDE, Offline
from tests.support.server import RunningServer, Servers


@pytest.fixture(scope="package")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


PLAYGROUND = {"ASSIST_AGENT": "tests.browser.agents:PlaygroundTestAgent", "ASSIST_LOG_LEVEL": "warning"}


@pytest.fixture(scope="package")
def agent_server(serve: Servers) -> RunningServer:
    return serve(PLAYGROUND)


@pytest.fixture(scope="package")
def keyed_server(serve: Servers) -> RunningServer:
    return serve({**PLAYGROUND, "ASSIST_API_KEYS": API_KEY})


@pytest.fixture(scope="package")
def one_stream_server(serve: Servers) -> RunningServer:
    """Takes one /assist stream at a time: a second one is refused with 503."""
    return serve({**PLAYGROUND, "ASSIST_MAX_STREAMS": "1"})


@pytest.fixture
def offline(browser: Any) -> Iterator[Callable[..., Offline]]:
    """Make offline contexts (`offline(viewport=...)`); each is closed, and checked, after the test."""
    made: list[Offline] = []

    def make(**options) -> Offline:
        options.setdefault("viewport", WIDE)
        made.append(Offline(browser, **options))
        return made[-1]

    yield make
    for context in made:
        context.context.close()
    for context in made:
        assert context.outside == [], f"requests left loopback: {context.outside}"
        assert context.errors == [], f"the page threw: {context.errors}"
