"""The playground against a service whose runs are resumable (ASSIST_DETACH_GRACE), in
Chromium: a stream cut mid-answer is resumed by the page (the answer shown once, whole), and
Stop stops the run at the service (DELETE /assist/runs/<handle>)."""

from __future__ import annotations

import socket
import threading

import httpx
import pytest

from tests.browser.support import browser_missing
from tests.server.test_resumable_runs import resumable_env
from tests.support.server import RunningServer, Servers
from tests.support.sse import events_of
from tests.support.waiting import wait_until

if (missing := browser_missing()) is not None:
    pytest.skip(missing, allow_module_level=True)

from tests.browser.test_playground import ask, last_turn, open_playground, wait_turn

pytestmark = pytest.mark.timeout(60)


class CutPostProxy:
    """A TCP proxy on loopback in front of `port`: the first `cuts` connections that carry a
    POST /assist are closed once `after_bytes` of the answer to it went through; the page's
    other requests (and its resumes) pass untouched."""

    def __init__(self, port: int, cuts: int, after_bytes: int) -> None:
        self.port = port
        self.cuts_left = cuts
        self.after_bytes = after_bytes
        self.cut = 0
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))  # a port of its own, held from the start
        self.listen_port = self._listener.getsockname()[1]
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.listen_port}"

    def close(self) -> None:
        self._closed = True
        self._listener.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.port))
            posted = threading.Event()
            threading.Thread(target=self._requests, args=(client, upstream, posted), daemon=True).start()
            threading.Thread(target=self._answers, args=(upstream, client, posted), daemon=True).start()

    def _requests(self, client: socket.socket, upstream: socket.socket, posted: threading.Event) -> None:
        try:
            while data := client.recv(65536):
                if b"POST /assist " in data:
                    posted.set()
                upstream.sendall(data)
        except OSError:
            pass
        finally:
            _close(upstream)

    def _answers(self, upstream: socket.socket, client: socket.socket, posted: threading.Event) -> None:
        sent_since_post = 0
        cutting = False
        try:
            while data := upstream.recv(512):
                if posted.is_set() and not cutting:
                    with self._lock:
                        cutting = self.cuts_left > 0
                        self.cuts_left -= cutting
                    posted.clear()
                if cutting:
                    sent_since_post += len(data)
                    if sent_since_post >= self.after_bytes:
                        self.cut += 1
                        break  # closed mid-body, as a dropped connection: no end of the chunked body
                client.sendall(data)
        except OSError:
            pass
        finally:
            _close(client)
            _close(upstream)


def _close(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)  # now, even while the other direction's thread is in recv()
    except OSError:
        pass
    try:
        sock.close()
    except OSError:
        pass


@pytest.fixture(scope="module")
def resumable_server(serve: Servers) -> RunningServer:
    return serve(resumable_env(log_level="info"))


def test_a_cut_answer_is_resumed_by_the_page_and_shown_once_whole(offline, resumable_server):
    proxy = CutPostProxy(int(resumable_server.url.rsplit(":", 1)[1]), cuts=1, after_bytes=3000)
    try:
        page = open_playground(offline(), proxy)
        ask(page, "count:60:20")
        turn = wait_turn(page, "done", timeout=30_000)
    finally:
        proxy.close()
    assert proxy.cut == 1, "the answer was cut mid-stream"
    assert turn.get_attribute("data-resumed") == "1"
    answer = turn.locator(".block.answer .markdown").inner_text().strip()
    assert answer == " ".join(f"t{index}" for index in range(60)), answer
    assert "/assist/runs/" in resumable_server.log()


def test_stop_stops_the_run_at_the_service(offline, resumable_server):
    page = open_playground(offline(), resumable_server)
    ask(page, "count:100000:20")
    page.wait_for_selector(".turn:last-child .block.answer[data-streaming=true]")
    page.click("#stop")
    wait_turn(page, "stopped")
    assert wait_until(lambda: "method=DELETE" in resumable_server.log(), timeout=10)
    deleted = [line for line in resumable_server.log().splitlines() if "method=DELETE" in line]
    assert "status=204" in deleted[-1] and "/assist/runs/" in deleted[-1]
    handle = deleted[-1].split("path=/assist/runs/", 1)[1].split()[0]
    with httpx.Client(timeout=30) as client:  # its stream, read again, ends with the stop
        replay = client.get(f"{resumable_server.url}/assist/runs/{handle}")
    events = [event.json for event in events_of(replay.text)]
    assert [event["event_name"] for event in events[-2:]] == ["error", "done"]
    assert events[-2]["content"]["details"]["stopped"] == "client"
    assert last_turn(page).locator(".block.answer .markdown").inner_text().startswith("t0 t1")
