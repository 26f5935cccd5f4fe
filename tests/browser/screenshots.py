"""Screenshots of the playground for the README: `python -m tests.browser.screenshots`.

Serves tests/browser/agents.py (a tool-using answer, then a question), and writes
docs/images/playground-wide.png and docs/images/playground-phone.png."""

from __future__ import annotations

from pathlib import Path

from playwright.sync_api import sync_playwright

from tests.browser.support import CHROMIUM, CHROMIUM_ARGS, PHONE, WIDE
from tests.support.server import ROOT, running_server

IMAGES = ROOT / "docs" / "images"


def shoot(browser, url: str, viewport: dict[str, int], path: Path, prompts: list[str]) -> None:
    context = browser.new_context(viewport=viewport, color_scheme="light")
    page = context.new_page()
    page.goto(url + "/playground")
    page.locator("#agent-name").filter(has_text="playground-test").wait_for()
    for count, prompt in enumerate(prompts, start=1):
        page.fill("#prompt", prompt)
        page.press("#prompt", "Enter")
        page.locator(".assistant[data-state=done]").nth(count - 1).wait_for()
    page.locator("#transcript").evaluate("t => t.scrollTop = t.scrollHeight")
    page.screenshot(path=str(path))
    context.close()
    print(path.relative_to(ROOT), path.stat().st_size, "bytes")


def main() -> None:
    IMAGES.mkdir(parents=True, exist_ok=True)
    env = {"ASSIST_AGENT": "tests.browser.agents:PlaygroundTestAgent", "ASSIST_LOG_LEVEL": "warning"}
    with running_server(env) as server, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        tour = "What is the weather in Oslo?"
        tall = {**WIDE, "height": 1200}  # the whole tool-using turn and the question below it
        shoot(browser, server.url, tall, IMAGES / "playground-wide.png", [tour, "ask:a day out"])
        shoot(browser, server.url, PHONE, IMAGES / "playground-phone.png", [tour])
        browser.close()


if __name__ == "__main__":
    main()
