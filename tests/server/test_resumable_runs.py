"""Resumable runs (ASSIST_DETACH_GRACE, docs/resumable.md) against a real uvicorn on loopback:
in this process's buffer, and in a real redis-server shared by two service processes.

A client is cut mid-answer (its connection closed after some events), resumes with
Last-Event-ID, and what it got in all is compared event by event with an uncut run of the
same deterministic agent (tests/server/resumable_agents.py).
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.server.test_stream_guarantees import assert_streams_completed, assert_well_ended
from tests.support.redis_server import RunningRedis, redis_server  # noqa: F401 - a fixture
from tests.support.server import RunningServer, Servers, running_server
from tests.support.sse import Stream, iter_events, new_body, read_response, read_stream
from tests.support.waiting import wait_until

pytestmark = pytest.mark.timeout(90)

AGENT = "tests.server.resumable_agents:CountingAgent"
KEY, OTHER_KEY = "resume-key-one", "resume-key-two"


def resumable_env(**settings: str) -> dict[str, str]:
    env = {
        "ASSIST_AGENT": AGENT,
        "ASSIST_DETACH_GRACE": "30",
        "ASSIST_LOG_LEVEL": "warning",
        "ASSIST_PING_INTERVAL": "1",
    }
    env.update({f"ASSIST_{name.upper()}": value for name, value in settings.items()})
    return env


@pytest.fixture(scope="module")
def server(serve: Servers) -> RunningServer:
    return serve(resumable_env(run_retention="60"))


@pytest.fixture(scope="module")
def pair(redis_server: RunningRedis) -> Iterator[tuple[RunningServer, RunningServer]]:  # noqa: F811
    env = resumable_env(redis_url=redis_server.url, run_heartbeat_timeout="2")
    with running_server(env) as first, running_server(env) as second:
        yield first, second


def cut_after(url: str, prompt: str, count: int, headers: dict[str, str] | None = None) -> tuple[str, list[dict]]:
    """POST, read `count` events, then close the connection: the handle and the events read."""
    events: list[dict[str, Any]] = []
    with httpx.Client(timeout=30) as client:
        with client.stream("POST", url + "/assist", json=new_body(prompt), headers=headers) as response:
            assert response.status_code == 200
            handle = response.headers["assist-run"]
            for event in iter_events(response):
                events.append(event.json)
                if len(events) >= count:
                    break
    return handle, events


def resume(url: str, handle: str, last_id: str | None = None, headers: dict[str, str] | None = None) -> Stream:
    sent = dict(headers or {})
    if last_id is not None:
        sent["Last-Event-ID"] = last_id
    with httpx.Client(timeout=30) as client:
        with client.stream("GET", f"{url}/assist/runs/{handle}", headers=sent) as response:
            return read_response(response)


def shape(events: list[dict]) -> list[tuple]:
    """What two runs of the deterministic agent share: everything but ids and stream ids."""
    return [(e["event_name"], e["content_type"], e.get("content"), e.get("is_complete")) for e in events]


def assert_exactly_the_rest(first: list[dict], rest: Stream, uncut: Stream) -> None:
    """`first` then `rest` is the uncut run, event for event, each id once and in order, ending with done."""
    assert rest.status == 200, rest.raw
    whole = first + rest.events
    assert shape(whole) == shape(uncut.events)
    ids = [event["id"] for event in whole]
    assert all(a < b for a, b in itertools.pairwise(ids)), "ids once each, in order"
    assert whole[-1]["event_name"] == "done"


def test_off_by_default_nothing_changes(scripted_server):
    stream = read_stream(scripted_server.url, new_body("fast:5"))
    assert_well_ended(stream)
    assert "assist-run" not in stream.headers
    assert httpx.get(scripted_server.url + "/assist/runs/" + "a" * 32).status_code == 404
    assert httpx.get(scripted_server.url + "/readyz").json() == {"status": "ready"}


def test_an_uncut_resumable_stream_is_a_plain_stream_plus_its_header(server):
    stream = read_stream(server.url, new_body("count:5:0"))
    assert_well_ended(stream)
    assert_streams_completed(stream)
    handle = stream.headers["assist-run"]
    assert len(handle) >= 32 and handle != read_stream(server.url, new_body("count:1:0")).headers["assist-run"]
    assert httpx.get(server.url + "/readyz").json() == {"status": "ready", "resumable_runs": "on (in this process)"}


def test_a_cut_client_resumes_with_last_event_id_and_gets_the_rest_exactly_once(server):
    uncut = read_stream(server.url, new_body("count:30:20"))
    handle, first = cut_after(server.url, "count:30:20", 5)
    rest = resume(server.url, handle, first[-1]["id"])
    assert_exactly_the_rest(first, rest, uncut)
    assert rest.headers["assist-run"] == handle


def test_without_last_event_id_a_resume_streams_the_run_from_its_first_event(server):
    handle, first = cut_after(server.url, "count:10:20", 3)
    whole = resume(server.url, handle)
    assert_well_ended(whole)
    assert [event["id"] for event in whole.events[:3]] == [event["id"] for event in first]


def test_after_done_a_resume_replays_from_any_event_until_the_retention_is_over(serve):
    server = serve(resumable_env(run_retention="2"))
    stream = read_stream(server.url, new_body("count:6:0"))
    handle = stream.headers["assist-run"]
    for index, event in enumerate(stream.events):
        replay = resume(server.url, handle, event["id"])
        assert replay.status == 200
        assert replay.events == stream.events[index + 1 :]
    assert wait_until(lambda: resume(server.url, handle).status == 404, timeout=20)


def test_an_id_the_run_never_sent_is_a_400_and_an_unknown_handle_a_404(server):
    stream = read_stream(server.url, new_body("count:3:0"))
    handle = stream.headers["assist-run"]
    other = read_stream(server.url, new_body("count:3:0")).events[1]["id"]
    for bad in (other, "not-an-id", "0" * 27):
        refused = resume(server.url, handle, bad)
        assert refused.status == 400 and b"Last-Event-ID" in refused.raw
    for unknown in ("A" * 32, "short", "../../etc", "x" * 65):
        assert resume(server.url, unknown).status == 404
        assert httpx.delete(f"{server.url}/assist/runs/{unknown}").status_code == 404


def test_delete_stops_the_run_and_every_stream_of_it_ends_with_the_error_and_done(server):
    handle, first = cut_after(server.url, "count:2000:20", 3)
    with httpx.Client(timeout=30) as client:
        with client.stream("GET", f"{server.url}/assist/runs/{handle}") as response:
            assert client.delete(f"{server.url}/assist/runs/{handle}").status_code == 204
            followed = read_response(response)
    assert_well_ended(followed)
    assert_streams_completed(followed)
    error = followed.events[-2]
    assert error["event_name"] == "error" and error["content"]["error_code"] == 499
    assert error["content"]["details"]["stopped"] == "client"
    later = resume(server.url, handle, first[-1]["id"])
    assert later.names()[-2:] == ["error", "done"]
    assert httpx.delete(f"{server.url}/assist/runs/{handle}").status_code == 204  # ended already


def test_the_keys_guard_resumes_and_a_handle_answers_only_to_the_key_that_started_it(serve):
    server = serve(resumable_env(api_keys=f"{KEY},{OTHER_KEY}"))
    mine, theirs = {"Authorization": f"Bearer {KEY}"}, {"Authorization": f"Bearer {OTHER_KEY}"}
    handle, first = cut_after(server.url, "count:40:20", 2, headers=mine)
    assert resume(server.url, handle).status == 401
    assert resume(server.url, handle, headers={"Authorization": "Bearer wrong"}).status == 401
    assert resume(server.url, handle, headers=theirs).status == 404
    assert httpx.delete(f"{server.url}/assist/runs/{handle}", headers=theirs).status_code == 404
    rest = resume(server.url, handle, first[-1]["id"], headers=mine)
    assert rest.status == 200 and rest.names()[-1] == "done"


def test_a_run_with_nobody_attached_goes_on_for_the_grace_then_is_stopped(serve):
    server = serve(resumable_env(detach_grace="1", log_level="info"))
    mark = len(server.log())
    handle, first = cut_after(server.url, "count:400:20", 2)
    assert wait_until(lambda: "no client attached for ASSIST_DETACH_GRACE" in server.log(mark), timeout=30)
    rest = resume(server.url, handle, first[-1]["id"])
    assert_well_ended(rest)
    error = rest.events[-2]
    assert error["event_name"] == "error" and error["content"]["details"]["stopped"] == "detached"
    assert "ASSIST_DETACH_GRACE" in error["content"]["error_message"]
    tokens = [e["content"] for e in rest.events if e["event_name"] == "FINAL_RESPONSE" and e["content"]]
    assert tokens, "it ran on while nobody was attached"
    assert tokens[-1] != "t399 ", "and was stopped before its end"


@pytest.mark.parametrize(
    ("setting", "value", "prompt"),
    [("run_max_events", "50", "count:500:0"), ("run_max_bytes", "20000", "big:100:1000")],
)
def test_past_a_bound_the_run_ends_with_an_error_naming_the_setting(serve, setting, value, prompt):
    server = serve(resumable_env(**{setting: value}))
    stream = read_stream(server.url, new_body(prompt))
    assert_well_ended(stream)
    assert_streams_completed(stream)
    errors = [event for event in stream.events if event["event_name"] == "error"]
    assert len(errors) == 1 and errors[0] == stream.events[-2]
    assert errors[0]["content"]["error_code"] == 507
    assert f"ASSIST_{setting.upper()}" in errors[0]["content"]["error_message"]
    if setting == "run_max_events":
        assert len(stream.events) <= int(value) + 3  # with the stream's last chunk, the error and done
    else:
        assert sum(len(frame.data) for frame in stream.frames[:-3]) <= int(value) + 1100


def test_a_resume_that_reaches_the_other_replica_gets_the_rest_exactly_once(pair):
    first_server, second_server = pair
    uncut = read_stream(first_server.url, new_body("count:40:20"))
    handle, first = cut_after(first_server.url, "count:40:20", 6)
    rest = resume(second_server.url, handle, first[-1]["id"])
    assert_exactly_the_rest(first, rest, uncut)
    replay = resume(second_server.url, handle)  # after done, from the first event, on the other replica
    assert [event["id"] for event in replay.events] == [event["id"] for event in first + rest.events]
    assert httpx.get(second_server.url + "/readyz").json()["resumable_runs"] == "on (redis)"


def test_a_delete_on_the_other_replica_stops_the_run(pair):
    first_server, second_server = pair
    handle, first = cut_after(first_server.url, "count:2000:20", 3)
    assert httpx.delete(f"{second_server.url}/assist/runs/{handle}").status_code == 202
    rest = resume(second_server.url, handle, first[-1]["id"])
    assert rest.names()[-2:] == ["error", "done"]
    assert rest.events[-2]["content"]["details"]["stopped"] == "client"


def test_through_nginx_a_cut_client_resumes_on_either_process_and_gets_the_rest_exactly_once(
    tmp_path,
    redis_server,  # noqa: F811
):
    """deploy/nginx as shipped, in front of two processes sharing a Redis: a client cut
    mid-answer resumes through nginx; two resumes at once are spread over both processes
    (least_conn), so one of them is served by a process that did not run the agent."""
    from tests.server.test_nginx_proxy import access_entries, proxied_pair

    env = resumable_env(redis_url=redis_server.url, run_heartbeat_timeout="2", log_format="json", log_level="info")
    with proxied_pair(tmp_path, **env) as proxy, proxy.client() as client:
        uncut = read_response_of(client, "count:60:20")
        with client.stream("POST", "/assist", json=new_body("count:60:20")) as response:
            handle, ran_by = response.headers["assist-run"], response.headers["x-request-id"]
            first = read_events(response, 6)
        results: dict[int, Stream] = {}

        def resume_through_nginx(slot: int) -> None:
            headers = {"Last-Event-ID": first[-1]["id"]}
            with client.stream("GET", f"/assist/runs/{handle}", headers=headers) as resumed:
                results[slot] = read_response(resumed)

        threads = [threading.Thread(target=resume_through_nginx, args=(slot,)) for slot in (0, 1)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
        for rest in results.values():
            assert_exactly_the_rest(first, rest, uncut)

        def process_of(request_id: str) -> str | None:
            names = [
                n for n, s in proxy.upstreams.items() if any(e["request_id"] == request_id for e in access_entries(s))
            ]
            return names[0] if names else None

        assert wait_until(lambda: all(process_of(r.headers["x-request-id"]) for r in results.values()), timeout=10)
        assert wait_until(lambda: process_of(ran_by) is not None, timeout=10)
        served = {process_of(rest.headers["x-request-id"]) for rest in results.values()}
        assert served == {"a", "b"}, "the two resumes were served by both processes, one not the agent's"


def read_response_of(client: httpx.Client, prompt: str) -> Stream:
    with client.stream("POST", "/assist", json=new_body(prompt)) as response:
        return read_response(response)


def read_events(response: httpx.Response, count: int) -> list[dict]:
    """The first `count` events of a response, then stop reading (the caller closes it)."""
    events: list[dict[str, Any]] = []
    for event in iter_events(response):
        events.append(event.json)
        if len(events) >= count:
            break
    return events
