"""/docs in Chromium with every request off loopback aborted: Swagger UI comes from the service."""

from __future__ import annotations

import pytest

from tests.browser.support import API_KEY, browser_missing

if (missing := browser_missing()) is not None:
    pytest.skip(missing, allow_module_level=True)

from playwright.sync_api import expect


def test_docs_render_with_no_network_and_only_with_the_key(offline, keyed_server):
    without_key = offline().page()
    assert without_key.goto(keyed_server.url + "/docs").status == 401

    context = offline(extra_http_headers={"Authorization": f"Bearer {API_KEY}"})
    page = context.page()
    requested: list[str] = []
    page.on("request", lambda request: requested.append(request.url))
    assert page.goto(keyed_server.url + "/docs").ok
    expect(page.locator(".swagger-ui .info .title")).to_contain_text("Sentient assist service")
    expect(page.locator(".opblock-summary-path", has_text="/assist")).to_be_visible()
    assert context.outside == [], f"/docs asked outside loopback: {context.outside}"
    assets = [url.removeprefix(keyed_server.url) for url in requested if "/docs/swagger-ui/" in url]
    assert {"/docs/swagger-ui/swagger-ui-bundle.js", "/docs/swagger-ui/swagger-ui.css"} <= set(assets)
