"""GET /playground in Chromium, against a real uvicorn serving tests/browser/agents.py."""

from __future__ import annotations

import json
import re

import pytest

from sentient_assist.protocol.request import Request
from tests.browser.support import API_KEY, PHONE, browser_missing
from tests.support.files import wait_for_file

if (missing := browser_missing()) is not None:
    pytest.skip(missing, allow_module_level=True)

from playwright.sync_api import expect

ULID = re.compile(r"[0-7][0-9A-HJKMNP-TV-Z]{25}")
RED = "rgb(180, 35, 24)"  # --error in playground.css


def open_playground(context, server, *, named: bool = True):
    page = context.page()
    response = page.goto(server.url + "/playground")
    assert response.ok
    if named:  # config.json has answered: the page knows the agent's name
        expect(page.locator("#agent-name")).not_to_be_empty()
    return page


def ask(page, prompt: str) -> None:
    page.fill("#prompt", prompt)
    page.press("#prompt", "Enter")


def last_turn(page):
    return page.locator(".turn").last


def wait_turn(page, state: str = "done", timeout: float = 10_000):
    page.wait_for_selector(f".turn:last-child .assistant[data-state={state}]", timeout=timeout)
    return last_turn(page)


def test_one_turn_shows_each_kind_of_event_as_it_should(offline, agent_server):
    page = open_playground(offline(), agent_server)
    assert page.title() == "playground-test · Playground"
    assert page.locator("#key-toggle").is_hidden()  # no key needed: no key field
    ask(page, "every-kind")
    turn = wait_turn(page)

    events = turn.locator(".events > .block")
    assert [events.nth(i).get_attribute("data-event") for i in range(events.count())] == [
        "THINKING", "PLAN", "STAGE", "TOOL_CALL", "TOOL_CALL", "SOURCES", "FORECAST", "HANDOFF",
        "REPORT", "OUTPUT", "error", "NOTES", "FINAL_RESPONSE",
    ]  # fmt: skip
    # THINKING: dimmed, and folded once its stream is complete (it can be opened again).
    thinking = turn.locator("details.thinking")
    assert thinking.evaluate("e => e.open") is False
    assert float(thinking.evaluate("e => getComputedStyle(e).opacity")) < 1
    thinking.locator("summary").click()
    assert "The user wants every kind of event." in thinking.inner_text()
    assert turn.locator(".block.stage").inner_text().endswith("search · start · running")
    # A TOOL_CALL and its TOOL_RESULT are one card, found by the call id, whatever the order.
    search = turn.locator('.block.tool[data-call-id="call-1"]')
    fetch = turn.locator('.block.tool[data-call-id="call-2"]')
    assert search.get_attribute("data-status") == "ok" and fetch.get_attribute("data-status") == "error"
    assert '"weather"' in search.inner_text() and "hits: 3" in search.inner_text().replace("\n", " ")
    assert "timed out" in fetch.inner_text()
    # SOURCES: links, only for http(s) URLs.
    sources = turn.locator('.block[data-event="SOURCES"]')
    link = sources.locator(".sources a")
    assert link.count() == 1
    assert link.get_attribute("href") == "https://example.com/oslo" and link.inner_text() == "Weather in Oslo"
    assert link.get_attribute("rel") == "noopener noreferrer nofollow" and link.get_attribute("target") == "_blank"
    assert "Not a web link" in sources.inner_text()
    # Any other document: a collapsible tree.
    forecast = turn.locator('.block[data-event="FORECAST"]')
    assert "celsius: -3" in forecast.inner_text().replace("\n", " ")
    forecast.locator("summary").first.click()
    assert "celsius" not in forecast.inner_text()
    # HANDOFF: a marker naming the specialist; the specialist's events show their source.
    assert turn.locator(".block.handoff .to-agent").inner_text() == "weather-specialist"
    assert turn.locator('.block[data-event="REPORT"] .source').inner_text() == "weather-specialist"
    assert turn.locator('.block[data-event="PLAN"] .source').inner_text() == "playground-test"
    metadata = turn.locator('.block[data-event="REPORT"] .metadata')  # folded: opened on demand
    assert "tiny" not in metadata.inner_text()
    metadata.locator("summary").click()
    expect(metadata).to_contain_text('"tiny"')  # built when first opened, after the toggle event
    # error: red, with its code.
    error = turn.locator(".block.error")
    assert error.locator(".error-code").inner_text() == "502"
    assert "one source failed" in error.inner_text()
    assert error.evaluate("e => getComputedStyle(e).color") == RED
    # The answer: Markdown.
    answer = turn.locator('.block[data-event="FINAL_RESPONSE"] .markdown')
    assert answer.locator("strong").inner_text() == "cold"
    assert answer.locator("li").all_inner_texts() == ["snow likely", "-3 °C"]
    assert answer.locator("code").inner_text() == "-3 °C"
    # USAGE: a footer, the events added up.
    assert turn.locator(".usage").inner_text() == "USAGE · 2 requests · 17 in · 8 out · 25 tokens"
    assert re.fullmatch(r"done · 25 events · [\d.]+ s", turn.locator(".turn-status").inner_text())


def test_the_second_turn_carries_the_first_as_history_and_the_agent_reads_it(offline, agent_server):
    page = open_playground(offline(), agent_server)
    with page.expect_request("**/assist") as first:
        ask(page, "every-kind")
    wait_turn(page)
    with page.expect_request("**/assist") as second:
        ask(page, "history")
    turn = wait_turn(page)

    one, two = first.value.post_data_json, second.value.post_data_json
    assert ULID.fullmatch(one["query"]["id"]) and ULID.fullmatch(two["query"]["id"])
    assert one["query"]["id"] != two["query"]["id"]
    assert one["session"]["interactions"] == [] and one["session"]["processor_id"] == "playground-test"
    chat = two["session"]
    assert chat["activity_id"] == one["session"]["activity_id"] and chat["request_id"] != one["session"]["request_id"]
    [past] = chat["interactions"]
    assert past["request"]["event"]["id"] == one["query"]["id"]
    assert past["request"]["event"]["chatId"] == chat["activity_id"]
    assert past["request"]["event"]["content"]["request_payload"]["parts"] == [{"prompt": "every-kind", "fileIds": []}]
    names = [response["event"]["event_name"] for response in past["responses"]]
    assert names[-1] == "done" and names.count("FINAL_RESPONSE") == 2  # its chunks as one, then the last

    seen = json.loads(turn.locator('.block[data-event="SEEN"] .markdown').inner_text())
    assert seen["processor_id"] == "playground-test" and seen["activity_id"] == chat["activity_id"]
    assert seen["messages"] == [
        ["user", "every-kind"],
        ["assistant", "It is **cold** in Oslo:\n\n- snow likely\n- `-3 °C`\n"],
    ]

    # New chat: a new conversation, with no history.
    page.click("#new-chat")
    assert page.locator(".turn").count() == 0
    with page.expect_request("**/assist") as third:
        ask(page, "history")
    wait_turn(page)
    assert third.value.post_data_json["session"]["interactions"] == []
    assert third.value.post_data_json["session"]["activity_id"] != chat["activity_id"]


def test_stop_disconnects_and_the_agent_is_cancelled_on_the_server(offline, agent_server, tmp_path):
    marker = tmp_path / "cancelled"
    page = open_playground(offline(), agent_server)
    ask(page, f"hang:{marker}")
    page.wait_for_selector(".turn:last-child .block.answer[data-streaming=true]")
    assert "waiting for ever" in last_turn(page).inner_text()
    assert page.locator("#send").is_hidden()
    # A screen reader hears the status line; the answer is busy, not read out on each render.
    assert page.locator("[aria-live]").count() == 0
    assert last_turn(page).locator(".turn-status").get_attribute("role") == "status"
    assert last_turn(page).locator(".events").get_attribute("aria-busy") == "true"
    page.click("#stop")
    turn = wait_turn(page, "stopped")
    assert turn.locator(".events").get_attribute("aria-busy") == "false"
    assert wait_for_file(marker, timeout=5) == "cancelled", "the agent was not cancelled after Stop"
    assert turn.locator(".block.answer").get_attribute("data-streaming") == "false"
    assert page.locator("#send").is_visible() and page.locator("#stop").is_hidden()
    # What was shown before Stop is history, as it would be in Sentient Chat.
    ask(page, "history")
    seen = json.loads(wait_turn(page).locator('.block[data-event="SEEN"] .markdown').inner_text())
    assert seen["messages"] == [["user", f"hang:{marker}"], ["assistant", "waiting for ever "]]


def test_error_events_are_shown_in_red_with_their_code_and_nothing_the_agent_hid(offline, agent_server):
    page = open_playground(offline(), agent_server)
    ask(page, "error")
    turn = wait_turn(page)
    errors = turn.locator(".block.error")
    assert errors.locator(".error-code").all_inner_texts() == ["503", "500"]
    assert "the weather service is down" in errors.nth(0).inner_text()
    assert "retry_after: 30" in errors.nth(0).inner_text().replace("\n", " ")
    assert errors.nth(1).evaluate("e => getComputedStyle(e).color") == RED
    assert "RuntimeError" in errors.nth(1).inner_text()  # details.error_type, from the service
    assert "must never show" not in page.content()


def test_a_question_is_answered_with_a_choice_or_a_reply_and_the_run_resumes(offline, agent_server):
    page = open_playground(offline(), agent_server)
    ask(page, "ask:a day out")
    wait_turn(page)
    question = page.locator(".turn").first.locator(".block.question")
    assert question.locator(".question-text").inner_text() == "Which city?"
    assert question.locator(".choice").all_inner_texts() == ["Oslo", "Lima"]
    with page.expect_request("**/assist") as answer:
        question.locator(".choice", has_text="Lima").click()
    turn = wait_turn(page)
    assert turn.locator(".user-message").inner_text() == "Lima"
    assert turn.locator(".markdown").inner_text() == "Resumed with Lima for a day out."
    # The question's turn went back with its token (the resume), and its controls are closed.
    [past] = answer.value.post_data_json["session"]["interactions"]
    [pause] = [r["event"] for r in past["responses"] if r["event"]["event_name"] == "ASK_USER"]
    assert pause["content"]["token"] and pause["content"]["resumable"] is True
    assert question.locator(".choice").first.is_disabled()

    ask(page, "ask:a week")
    reply = wait_turn(page).locator(".block.question form.reply")
    reply.locator("input").fill("Kyoto")
    reply.locator("button").click()
    assert wait_turn(page).locator(".markdown").inner_text() == "Resumed with Kyoto for a week."


@pytest.mark.parametrize("csp", ["enforced", "bypassed"])
def test_markup_from_the_agent_never_runs_and_loads_nothing(offline, agent_server, csp):
    # Bypassed: what the sanitiser alone lets through (the CSP is the second line, not the first).
    context = offline(bypass_csp=csp == "bypassed")
    context.context.add_init_script(
        "window.__violations = [];"
        "document.addEventListener('securitypolicyviolation',"
        " e => window.__violations.push([e.effectiveDirective, e.sourceFile, e.blockedURI]));"
    )
    page = context.page()
    requested: list[str] = []
    page.on("request", lambda request: requested.append(request.url))
    response = page.goto(agent_server.url + "/playground/")
    assert "script-src 'self'" in response.headers["content-security-policy"]
    ask(page, "hostile")
    turn = wait_turn(page)
    page.wait_for_timeout(300)  # an image's onerror, or a load, would have happened by now
    assert page.evaluate("window.__pwned") is None
    assert [url for url in requested if "agent-named" in url] == []  # on loopback or off it
    dangerous = ", ".join(
        "#transcript " + selector
        for selector in (
            "script", "iframe", "svg", "video", "audio", "source", "picture", "object", "embed", "link",
            "img:not([src^='data:'])", "input:not([type=checkbox])",
            "[onerror]", "[onload]", "[ontoggle]", "[background]", "[poster]", "[srcset]", "[ping]",
        )
    )  # fmt: skip
    assert page.locator(dangerous).count() == 0
    # Links only where the agent wrote an absolute http(s) or mailto URL: not javascript:, not
    # "//host" or "/path" (resolved against the page), not an image with no source.
    hrefs = page.eval_on_selector_all("#transcript a[href]", "links => links.map(a => a.getAttribute('href'))")
    assert set(hrefs) == {
        "https://example.com/ok",
        "http://evil.example/agent-named/tracker.png",  # an image: a link to it, never loaded
        "mailto:someone@example.com",
        "https://example.com/fine",
    }, hrefs
    answer = turn.locator(".block.answer")
    assert "the end" in answer.inner_text()
    for text in ("protocol-relative", "relative", "image: blank", "image: pic"):
        assert answer.get_by_text(text, exact=True).evaluate("e => e.closest('[href]')") is None, text
    # SOURCES: one link, the others named as text; a document's strings link only to http(s).
    sources = turn.locator('.block[data-event="SOURCES"]')
    assert sources.locator(".sources a").all_inner_texts() == ["fine"]
    assert "JAVASCRIPT:" in sources.locator(".sources").inner_text()
    assert turn.locator('.block[data-event="LINKS"] a').count() == 0
    # A name and a document's keys and values are shown as text, markup and all.
    assert turn.locator(".block.document .event-name").first.inner_text().startswith("<script>")
    assert "<script>" in turn.locator(".block.document .json-key").first.inner_text()
    assert "<script>" in turn.locator(".block.error").inner_text()
    # Chromium reports the handlers it meets while DOMPurify parses the text in an inert
    # document (before it drops them); any other report (an image or a medium the policy
    # stopped) would be markup that reached the page.
    violations = page.evaluate("window.__violations")
    assert all(
        directive.startswith("script-src") and source.endswith("/vendor/dompurify/purify.es.js")
        for directive, source, _ in violations
    ), violations


def test_a_key_is_asked_for_refused_when_wrong_and_sent_when_right(offline, keyed_server):
    page = open_playground(offline(), keyed_server, named=False)
    page.wait_for_selector("#key-panel:not([hidden])")
    assert page.locator("#key-status").inner_text() == "This service needs an API key."
    assert page.locator("#agent-name").inner_text() == ""  # named only to a holder of a key
    ask(page, "every-kind")
    turn = wait_turn(page, "failed")
    assert turn.locator(".error-code").inner_text() == "401"
    assert "API key is required" in turn.locator(".block.error").inner_text()
    assert page.input_value("#prompt") == "every-kind"  # given back, to send again

    page.fill("#api-key", "nøkkel-ключ")  # fetch() could not send it: said so, not sent
    page.press("#api-key", "Enter")
    expect(page.locator("#key-status")).to_contain_text("A key is ASCII")
    page.fill("#api-key", "not-the-key")
    page.press("#api-key", "Enter")
    expect(page.locator("#key-status")).to_contain_text("refused")
    page.fill("#api-key", API_KEY)
    page.click("#key-panel button")
    expect(page.locator("#key-panel")).to_be_hidden()
    assert page.locator("#agent-name").inner_text() == "playground-test"
    with page.expect_request("**/assist") as sent:
        page.press("#prompt", "Enter")
    assert sent.value.headers["authorization"] == f"Bearer {API_KEY}"
    wait_turn(page)
    # The refused turn is not history: the agent never saw it.
    assert sent.value.post_data_json["session"]["interactions"] == []

    # config.json fails: the key's status says so, not "Checking..." for ever.
    page.route("**/config.json", lambda route: route.abort())
    page.click("#key-toggle")
    page.fill("#api-key", "another-key")
    page.press("#api-key", "Enter")
    expect(page.locator("#key-status")).to_contain_text("could not be checked")


def test_the_key_in_the_field_is_the_one_sent_with_no_use_key_click(offline, keyed_server):
    page = open_playground(offline(), keyed_server, named=False)
    page.wait_for_selector("#key-panel:not([hidden])")

    page.fill("#api-key", "not-the-key")  # typed, and sent at once: refused
    with page.expect_request("**/assist") as wrong:
        ask(page, "every-kind")
    assert wrong.value.headers["authorization"] == "Bearer not-the-key"
    turn = wait_turn(page, "failed")
    assert turn.locator(".error-code").inner_text() == "401"
    message = turn.locator(".block.error").inner_text()
    assert "the API key is not valid" in message and "Type the key above, then send again" in message
    expect(page.locator("#key-status")).to_contain_text("refused")
    assert page.input_value("#prompt") == "every-kind"

    page.fill("#api-key", "nøkkel-ключ")  # fetch() could not send it: said so, nothing sent
    page.click("#send")
    expect(page.locator("#key-status")).to_contain_text("A key is ASCII")
    assert page.locator(".turn").count() == 1 and page.input_value("#prompt") == "every-kind"

    page.fill("#api-key", f" {API_KEY} ")  # what the message said: type the key, send again
    with page.expect_request("**/assist") as right:
        page.click("#send")
    assert right.value.headers["authorization"] == f"Bearer {API_KEY}"
    answer = wait_turn(page).locator('.block[data-event="FINAL_RESPONSE"] .markdown')
    assert answer.locator("strong").inner_text() == "cold"
    expect(page.locator("#key-status")).to_have_text("Key accepted.")
    expect(page.locator("#agent-name")).to_have_text("playground-test")

    # Kept for the next sends, and for the tab's next page.
    with page.expect_request("**/assist") as again:
        ask(page, "history")
    assert again.value.headers["authorization"] == f"Bearer {API_KEY}"
    wait_turn(page)
    assert page.evaluate("sessionStorage.getItem('assist-playground-key')") == API_KEY
    page.reload()
    expect(page.locator("#agent-name")).to_have_text("playground-test")
    assert page.input_value("#api-key") == API_KEY and page.locator("#key-panel").is_hidden()


def test_a_2000_event_answer_streams_without_stalling_the_page(offline, agent_server):
    page = open_playground(offline(), agent_server)
    # The longest time between two animation frames while the answer streams in: a stall
    # (the page doing all its work in one go) shows as one long gap.
    page.evaluate(
        """() => { window.__gaps = []; let last = performance.now();
        const tick = (now) => { window.__gaps.push(now - last); last = now;
          if (!window.__stopProbe) requestAnimationFrame(tick); };
        requestAnimationFrame(tick); }"""
    )
    ask(page, "many:1998")
    turn = wait_turn(page, timeout=60_000)
    page.evaluate("window.__stopProbe = true")
    assert re.match(r"done · 2000 events", turn.locator(".turn-status").inner_text())
    answer = turn.locator(".block.answer .markdown")
    assert answer.locator("h2").count() == 20 and "word1997" in answer.inner_text()
    longest = page.evaluate("Math.max(...window.__gaps)")
    assert longest < 1000, f"the page stalled for {longest:.0f} ms"
    page.fill("#prompt", "still typing")  # and it still takes input
    assert page.input_value("#prompt") == "still typing"


def test_a_phone_sized_window_shows_everything_without_sideways_scrolling(offline, agent_server):
    page = open_playground(offline(viewport=PHONE, is_mobile=True, has_touch=True), agent_server)
    ask(page, "every-kind")
    turn = wait_turn(page)
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    boxes = turn.locator(".block").evaluate_all("blocks => blocks.map(b => b.getBoundingClientRect().right)")
    assert boxes and max(boxes) <= PHONE["width"]
    send = page.locator("#send").bounding_box()
    assert send is not None and send["x"] + send["width"] <= PHONE["width"]
    assert send["y"] + send["height"] <= PHONE["height"]
    assert page.locator("#new-chat").is_visible() and page.locator("#prompt").is_visible()


def test_an_interrupt_shows_the_tool_call_and_yes_resumes_the_run(offline, agent_server):
    page = open_playground(offline(), agent_server)
    ask(page, "approve")
    wait_turn(page)
    card = page.locator(".turn").first.locator('.block.question[data-event="INTERRUPT"]')
    assert card.locator(".question-text").inner_text() == "Decision needed: approval"
    assert card.locator(".tool-name").inner_text() == "delete_file"
    assert 'path: "/tmp/old.log"' in card.inner_text().replace("\n", " ")
    assert card.locator(".choice").all_inner_texts() == ["yes", "no"]
    with page.expect_request("**/assist") as answer:
        card.locator(".choice", has_text="yes").click()
    turn = wait_turn(page)
    assert turn.locator(".user-message").inner_text() == "yes"
    assert turn.locator(".markdown").inner_text() == "Resumed with yes for deleting /tmp/old.log."
    [past] = answer.value.post_data_json["session"]["interactions"]
    [pause] = [r["event"] for r in past["responses"] if r["event"]["event_name"] == "INTERRUPT"]
    assert pause["content"]["tool_call"]["name"] == "delete_file" and pause["content"]["token"]
    assert card.locator(".choice").first.is_disabled()


def test_a_failed_or_refused_answer_gives_the_prompt_back_and_leaves_the_question_open(offline, agent_server):
    page = open_playground(offline(), agent_server)
    ask(page, "ask:a day out")
    wait_turn(page)
    question = page.locator(".turn").first.locator(".block.question")

    page.route("**/assist", lambda route: route.abort())  # the network fails
    question.locator(".choice", has_text="Lima").click()
    failed = wait_turn(page, "failed")
    assert "The connection to the service failed" in failed.locator(".block.error").inner_text()
    assert page.input_value("#prompt") == "Lima"
    assert question.locator(".choice").first.is_enabled()  # the question still waits for its answer

    def corrupt_history(route) -> None:  # history the service cannot take back: an over-long name
        body = route.request.post_data_json
        body["session"]["interactions"][0]["responses"][0]["event"]["event_name"] = "N" * 300
        route.continue_(post_data=json.dumps(body))

    page.unroute("**/assist")
    page.route("**/assist", corrupt_history)
    page.fill("#prompt", "")
    question.locator(".choice", has_text="Oslo").click()
    refused = wait_turn(page, "failed")
    assert refused.locator(".error-code").inner_text() == "422"
    message = refused.locator(".block.error .error-line").inner_text()
    assert "session.interactions.0.responses.0" in message
    assert "history cannot be sent back" in message and "New chat" in message
    assert page.input_value("#prompt") == "Oslo"
    assert question.locator(".choice").first.is_enabled()

    # A detail list of anything (a proxy's, say): shown as it is, and the page does not throw.
    page.unroute("**/assist")
    odd = {"detail": [None, 7, {"loc": "body", "msg": "not a list"}]}
    page.route("**/assist", lambda route: route.fulfill(status=422, json=odd))
    question.locator(".choice", has_text="Oslo").click()
    assert "null; 7; : not a list" in wait_turn(page, "failed").locator(".block.error").inner_text()

    page.unroute("**/assist")
    page.fill("#prompt", "")
    question.locator(".choice", has_text="Oslo").click()
    assert wait_turn(page).locator(".markdown").inner_text() == "Resumed with Oslo for a day out."
    assert question.locator(".choice").first.is_disabled()  # answered: closed
    assert page.input_value("#prompt") == ""


def test_a_busy_service_says_try_again_and_gives_the_prompt_back(offline, one_stream_server, tmp_path):
    context = offline()
    busy = open_playground(context, one_stream_server)
    ask(busy, f"hang:{tmp_path / 'cancelled'}")  # holds the service's only stream
    busy.wait_for_selector(".turn:last-child .block.answer[data-streaming=true]")
    page = open_playground(context, one_stream_server)
    ask(page, "every-kind")
    turn = wait_turn(page, "failed")
    assert turn.locator(".error-code").inner_text() == "503"
    assert "Try again in a moment" in turn.locator(".block.error").inner_text()
    assert page.input_value("#prompt") == "every-kind"
    busy.click("#stop")
    wait_turn(busy, "stopped")


def test_history_sent_back_is_valid_and_what_was_shown_even_without_config_json(offline, agent_server):
    page = offline().page()
    page.route("**/config.json", lambda route: route.abort())  # the agent's name is not known
    page.goto(agent_server.url + "/playground/")
    with page.expect_request("**/assist") as first:
        ask(page, "tangled")
    shown = wait_turn(page)
    assert "session" not in first.value.post_data_json  # the service makes one
    answer = shown.locator('.block[data-event="FINAL_RESPONSE"] .markdown').inner_text()
    assert answer == "shown answer"  # not the NOTES chunk of the same stream_id, nor what came after
    assert shown.locator('.block[data-event="NOTES"] .markdown').inner_text() == "a note"
    with page.expect_request("**/assist") as second:
        ask(page, "history")
    seen = json.loads(wait_turn(page).locator('.block[data-event="SEEN"] .markdown').inner_text())

    body = second.value.post_data_json
    Request.model_validate(body)  # what the service validates it with
    chat = body["session"]
    assert chat["processor_id"] == "playground-test"  # done's source, not the specialist's who spoke first
    [past] = chat["interactions"]
    chunks = [
        (event["event_name"], event["content"], event["is_complete"])
        for event in (response["event"] for response in past["responses"])
        if event["content_type"] == "chunked.text"
    ]
    assert chunks == [
        ("FINAL_RESPONSE", "shown ", False),
        ("NOTES", "a note", False),
        ("FINAL_RESPONSE", "answer", True),
    ]
    assert seen["messages"] == [["user", "tangled"], ["assistant", answer]]
