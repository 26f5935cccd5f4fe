"""What the service sends for /playground and /docs, read over HTTP (no browser needed)."""

from __future__ import annotations

import httpx

from sentient_assist.server.playground import CONTENT_SECURITY_POLICY
from tests.browser.support import API_KEY


def test_the_playground_is_served_from_the_package_with_a_strict_policy(agent_server):
    redirect = httpx.get(agent_server.url + "/playground")
    assert redirect.status_code == 307 and redirect.headers["location"] == "playground/"
    page = httpx.get(agent_server.url + "/playground/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert 'src="playground.js"' in page.text and "http" not in page.text.replace('href="../docs"', "")
    for name in ("playground.js", "render.js", "vendor/marked/marked.esm.js", "vendor/dompurify/purify.es.js"):
        asset = httpx.get(f"{agent_server.url}/playground/{name}")
        assert asset.status_code == 200 and asset.headers["content-type"].startswith("text/javascript"), name
        assert asset.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
        assert asset.headers["x-content-type-options"] == "nosniff"
    assert "script-src 'self'" in CONTENT_SECURITY_POLICY and "unsafe-inline" not in CONTENT_SECURITY_POLICY
    # Only the page's folder: a path that climbs out of it finds nothing.
    assert httpx.get(agent_server.url + "/playground/%2e%2e/playground.py").status_code == 404


def test_refusals_under_the_playground_carry_its_security_headers_too(agent_server):
    # A 404 or 405 is a page of its own: nothing may be sniffed, framed or run from it either.
    missing = httpx.get(agent_server.url + "/playground/nothing.js")
    wrong_method = httpx.post(agent_server.url + "/playground/playground.js")
    assert missing.status_code == 404 and missing.json() == {"detail": "Not Found"}
    assert wrong_method.status_code == 405 and wrong_method.headers["allow"] == "GET, HEAD"
    for response in (missing, wrong_method):
        assert response.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
        assert response.headers["x-content-type-options"] == "nosniff"


def test_config_says_a_key_is_needed_and_names_the_agent_only_to_a_key(agent_server, keyed_server):
    open_config = httpx.get(agent_server.url + "/playground/config.json").json()
    assert open_config == {
        "key_required": False,
        "key_accepted": True,
        "agent": {"name": "playground-test", "description": open_config["agent"]["description"]},
    }
    url = keyed_server.url + "/playground/config.json"
    assert httpx.get(url).json() == {"key_required": True, "key_accepted": False, "agent": None}
    assert httpx.get(url, headers={"Authorization": "Bearer wrong"}).json()["key_accepted"] is False
    keyed = httpx.get(url, headers={"Authorization": f"Bearer {API_KEY}"})
    assert keyed.json()["key_accepted"] is True and keyed.json()["agent"]["name"] == "playground-test"
    assert keyed.headers["cache-control"] == "no-store"
    # The page itself is open: it holds nothing secret.
    assert httpx.get(keyed_server.url + "/playground/").status_code == 200


def test_docs_load_swagger_ui_from_the_service_and_stay_behind_the_key(keyed_server):
    assert httpx.get(keyed_server.url + "/docs").status_code == 401
    assert httpx.get(keyed_server.url + "/openapi.json").status_code == 401
    docs = httpx.get(keyed_server.url + "/docs", headers={"Authorization": f"Bearer {API_KEY}"})
    assert docs.status_code == 200
    assert "cdn" not in docs.text.lower() and "/docs/swagger-ui/swagger-ui-bundle.js" in docs.text
    for name, kind in [("swagger-ui-bundle.js", "text/javascript"), ("swagger-ui.css", "text/css")]:
        asset = httpx.get(f"{keyed_server.url}/docs/swagger-ui/{name}")  # open: the same for everyone
        assert asset.status_code == 200 and asset.headers["content-type"].startswith(kind)
        assert asset.headers["x-content-type-options"] == "nosniff"
        assert len(asset.content) > 100_000
    assert httpx.get(keyed_server.url + "/docs/swagger-ui/pyproject.toml").status_code == 404
