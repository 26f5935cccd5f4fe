"""Resumable runs when things go wrong, against a real redis-server and real uvicorn processes:
Redis unreachable at start, Redis dying mid-run, the replica running a run SIGKILLed, a
reconnect exactly as the run ends, and 1,000 resumes in a row (Redis's clients, the RSS)."""

from __future__ import annotations

import itertools
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from sentient_assist.server.redis_readers import MAX_CONNECTIONS
from tests.server.test_resumable_runs import cut_after, resumable_env, resume, shape
from tests.server.test_stream_guarantees import assert_well_ended
from tests.support.redis_server import RunningRedis, running_redis
from tests.support.server import RunningServer, Servers, free_port, running_server
from tests.support.sse import Frame, Stream, iter_events, new_body, read_response, read_stream
from tests.support.waiting import wait_until

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def redis() -> Iterator[RunningRedis]:
    """The module's redis-server, shared by the replicas of the tests that leave it running."""
    with running_redis() as server:
        yield server


def pair_env(redis: RunningRedis, **settings: str) -> dict[str, str]:
    return resumable_env(redis_url=redis.url, run_heartbeat_timeout="1", **settings)


@pytest.fixture
def pair(serve: Servers, redis: RunningRedis) -> tuple[RunningServer, RunningServer]:
    """Two replicas sharing the module's Redis (the same settings: the names tell them apart);
    one a test killed is started afresh for the next."""
    return serve({**pair_env(redis), "TEST_REPLICA": "first"}), serve({**pair_env(redis), "TEST_REPLICA": "second"})


def rss_kb(server: RunningServer) -> int:
    for line in Path(f"/proc/{server.process.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def test_with_redis_unreachable_at_start_the_service_serves_plain_streams_and_says_so():
    port = free_port()  # nothing listens there yet
    env = resumable_env(redis_url=f"redis://127.0.0.1:{port}/0", run_heartbeat_timeout="1")
    with running_server(env) as server:
        assert "resumable runs are off: Redis (ASSIST_REDIS_URL) does not answer" in server.log()
        ready = httpx.get(server.url + "/readyz")
        assert ready.status_code == 200
        assert ready.json() == {"status": "ready", "resumable_runs": "off: redis does not answer"}
        stream = read_stream(server.url, new_body("count:5:0"))
        assert_well_ended(stream)
        assert "assist-run" not in stream.headers
        with running_redis(port):  # Redis comes: new runs are resumable again
            assert wait_until(lambda: "on" in httpx.get(server.url + "/readyz").json()["resumable_runs"], 20)
            assert "assist-run" in read_stream(server.url, new_body("count:2:0")).headers
        assert "Traceback" not in server.log()


def test_redis_dying_mid_run_the_live_stream_still_ends_with_done_and_a_resume_says_it_cannot():
    with running_redis() as redis, running_server(pair_env(redis)) as first, running_server(pair_env(redis)) as second:
        killed: list[str] = []

        def kill_redis_once_streaming(frame: Frame) -> None:
            if frame.event_name == "FINAL_RESPONSE" and not killed:
                killed.append(frame.json["id"])
                redis.kill()

        stream = read_stream(first.url, new_body("count:60:20"), on_frame=kill_redis_once_streaming)
        assert killed
        assert_well_ended(stream)
        assert "error" not in stream.names() and len(stream.events) == 63
        handle = stream.headers["assist-run"]
        refused = resume(second.url, handle, killed[0])
        assert refused.status == 503 and b"Redis" in refused.raw
        assert resume(first.url, handle, killed[0]).status == 200  # the replica that ran it still has it
        assert wait_until(lambda: "off" in httpx.get(first.url + "/readyz").json()["resumable_runs"], 20)
        plain = read_stream(first.url, new_body("count:3:0"))
        assert_well_ended(plain)
        assert "assist-run" not in plain.headers
        assert "Traceback" not in first.log() + second.log()


def test_a_run_whose_replica_is_sigkilled_resumes_elsewhere_with_what_was_buffered_then_error_and_done(redis, pair):
    first, second = pair
    handle, got = cut_after(first.url, "count:5000:20", 4)
    events_key = f"assist:run:{{{handle}}}:events"
    assert wait_until(lambda: int(redis.command("XLEN", events_key)) >= 20, timeout=20)
    first.process.kill()
    first.process.wait()
    rest = resume(second.url, handle, got[-1]["id"])
    assert_well_ended(rest)
    whole = got + rest.events
    assert all(a["id"] < b["id"] for a, b in itertools.pairwise(whole))
    tokens = [e["content"] for e in whole if e["event_name"] == "FINAL_RESPONSE"]
    assert tokens == [f"t{index} " for index in range(len(tokens))], "what was buffered, in order, once"
    assert len(tokens) >= 15
    error = rest.events[-2]
    assert error["event_name"] == "error" and error["content"]["details"] == {"lost": "replica"}
    again = resume(second.url, handle, got[-1]["id"])  # the end is written once, for every reader
    assert again.events == rest.events


def test_a_reconnect_exactly_as_the_run_ends_gets_the_rest_and_done(pair):
    first, second = pair
    # Each event as it arrives, a resume from it is started on the other replica and on this
    # one: the last of them race the end of the run (the writer's last batch, `done`).
    resumes: list[tuple[int, Stream]] = []
    threads: list[threading.Thread] = []
    lock = threading.Lock()
    headers: dict[str, str] = {}

    def resume_from(index: int, event_id: str, url: str) -> None:
        got = resume(url, headers["handle"], event_id)
        with lock:
            resumes.append((index, got))

    def on_frame(frame: Frame) -> None:
        index = len(threads) // 2
        for url in (second.url, first.url):
            thread = threading.Thread(target=resume_from, args=(index, frame.json["id"], url))
            thread.start()
            threads.append(thread)

    with httpx.Client(timeout=30) as client:
        with client.stream("POST", first.url + "/assist", json=new_body("count:30:3")) as response:
            headers["handle"] = response.headers["assist-run"]
            stream = read_response(response, on_frame)
    for thread in threads:
        thread.join(timeout=30)
    assert_well_ended(stream)
    assert len(resumes) == 2 * len(stream.events)
    for index, got in resumes:
        assert got.status == 200, got.raw
        assert got.events == stream.events[index + 1 :]


def test_a_thousand_resumes_in_a_row_leave_redis_clients_and_memory_flat(redis, pair):
    first, second = pair
    finished = read_stream(first.url, new_body("count:100:0"))
    done_handle = finished.headers["assist-run"]
    live_handle, live = cut_after(first.url, "count:100000:20", 2)

    def one_resume(index: int, client: httpx.Client) -> None:
        if index % 2 == 0:  # a replay of a finished run, read whole, on the other replica
            response = client.get(f"{second.url}/assist/runs/{done_handle}")
            assert response.status_code == 200 and response.text.count("event: ") == len(finished.events)
        else:  # a follow of a live run, left after its first event (the reader blocked in XREAD)
            headers = {"Last-Event-ID": live[-1]["id"]}
            with client.stream("GET", f"{second.url}/assist/runs/{live_handle}", headers=headers) as response:
                assert response.status_code == 200
                next(iter_events(response))

    with httpx.Client(timeout=30) as client:
        # Warm up: the connection pool fills to what this pace needs (a follow given up
        # mid-XREAD leaves its connection busy until Redis ends the block), caches, the allocator.
        for index in range(300):
            one_resume(index, client)
        clients_before, rss_before = redis.connected_clients(), rss_kb(second)
        for index in range(1000):
            one_resume(index, client)
        clients_after = redis.connected_clients()
    # Flat: what Redis sees is the replica's pool, at the most the pace of these resumes needed
    # (a follow left mid-XREAD gives its connection up; Redis drops it when the block ends),
    # however many resumes there were: never past the pool's cap, plus the other replica's
    # writer and heartbeat and this test's own connection.
    assert clients_after <= MAX_CONNECTIONS + 4, (clients_before, clients_after)
    assert clients_after <= clients_before + MAX_CONNECTIONS // 4, (clients_before, clients_after)
    assert rss_kb(second) - rss_before < 10_000, "the RSS grew by 10 MB or more over 1,000 resumes"
    httpx.delete(f"{first.url}/assist/runs/{live_handle}")
    assert "Traceback" not in second.log()


def test_the_shapes_of_resumed_runs_are_checked_against_an_uncut_run(pair):
    """One more cut at every point of a short run, over Redis: the rest is always exactly what follows."""
    first, second = pair
    uncut = read_stream(first.url, new_body("count:8:10"))
    for cut in range(1, len(uncut.events)):
        handle, got = cut_after(first.url, "count:8:10", cut)
        rest = resume(second.url, handle, got[-1]["id"])
        assert shape(got + rest.events) == shape(uncut.events), cut


def test_a_replica_shutting_down_ends_its_runs_with_503_and_done_for_a_resume_elsewhere(redis, pair):
    second = pair[1]
    with running_server(pair_env(redis, shutdown_grace="1")) as first:
        handle, got = cut_after(first.url, "count:5000:20", 3)
        first.process.send_signal(signal.SIGTERM)
        assert first.process.wait(timeout=20) in (0, -signal.SIGTERM)
        rest = resume(second.url, handle, got[-1]["id"])
        assert_well_ended(rest)
        error = rest.events[-2]
        assert error["event_name"] == "error" and error["content"]["error_code"] == 503
        assert "lost" not in error["content"]["details"], "ended by its replica, not found lost"
        tokens = [e["content"] for e in got + rest.events if e["event_name"] == "FINAL_RESPONSE" and e["content"]]
        assert tokens == [f"t{index} " for index in range(len(tokens))]
