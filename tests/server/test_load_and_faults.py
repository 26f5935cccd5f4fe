"""500 streams at once, a third of them cut mid-stream, against a real uvicorn.

Every stream that is not cut gets every event, in order; every cut stream's agent is
cancelled; and once all have ended the server holds what it held before the load: the
same asyncio tasks, file descriptors and ResponseHandler objects, and not much more memory.

The agent is tests/server/load_agent.py: the ScriptedAgent (for `stats`) plus `paced`,
whose streams wait at a gate after their first chunk until all 500 have sent theirs, so
that all 500 are open at once whatever the speed of the machine.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import random
import re
import resource
import socket
import struct
import time
import uuid
from collections.abc import Iterator

import httpx
import pytest

from tests.support.server import RunningServer, Servers
from tests.support.sse import Stream, aread_response, new_body, read_stream

pytestmark = pytest.mark.timeout(90)  # a hang guard: the module takes a few seconds

STREAMS = 500
CHUNKS = 30  # chunks a surviving stream gets, "0 " .. "29 ", then the empty last one
PAUSE_MS = 10
# A cut stream asks for many more chunks: its agent is surely still running when its
# client leaves, so only cancellation brings the task count back down in time.
VICTIM_CHUNKS = 100_000
SEED = 20_241_130
SETTLE_SECONDS = 10.0  # bounded wait for cancelled agents and closed sockets to be gone
# Open fds may differ by a few between two `stats` readings with no leak at all: each
# reading counts its own connection, but the previous reading's socket (or a warm-up one)
# may not be closed yet when the server only sees the client's FIN a moment later, and the
# event loop may open an fd lazily. A leak of the load would show as hundreds (one per stream).
FD_TOLERANCE = 5
# Memory Python frees is mostly kept by pymalloc's arenas and glibc's heap, not given back
# to the OS, so RSS after 500 streams stays above the baseline with no leak at all. The
# bound only catches gross growth; the exact leak check is the ResponseHandler count.
RSS_GROWTH_LIMIT_KB = 50 * 1024

ENV = {
    "ASSIST_AGENT": "tests.server.load_agent:LoadAgent",
    "ASSIST_MAX_STREAMS": "2000",
    "ASSIST_REQUEST_TIMEOUT": "120",
    "ASSIST_LOG_LEVEL": "warning",
}


@pytest.fixture(scope="module")
def load_server(serve: Servers) -> Iterator[RunningServer]:
    # 500 client sockets here, 500 there: the server inherits this process's limit.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and (hard == resource.RLIM_INFINITY or soft < hard):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    try:
        yield serve(ENV)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


# --- the server, from inside and outside -------------------------------------------------


def server_stats(url: str) -> dict[str, int]:
    """What the server process holds, as the `stats` behaviour reports it from inside a request."""
    stream = read_stream(url, new_body("stats"), timeout=30)
    assert stream.names() == ["STATS", "done"], stream.raw[:500]
    return stream.events[0]["content"]


def fds_from_outside(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def metrics(url: str) -> dict[str, float]:
    text = httpx.get(url + "/metrics", timeout=30).text
    return {name: float(value) for name, value in re.findall(r"^([a-z_]+(?:\{[^}]*\})?) (\S+)$", text, re.M)}


def steady_stats(url: str) -> dict[str, int]:
    """A baseline: `stats` read until two readings in a row agree on tasks and handlers."""
    previous = server_stats(url)
    deadline = time.monotonic() + SETTLE_SECONDS
    while time.monotonic() < deadline:
        time.sleep(0.1)
        current = server_stats(url)
        if (current["tasks"], current["response_handlers"]) == (previous["tasks"], previous["response_handlers"]):
            return current
        previous = current
    return previous


def settled_stats(url: str, pid: int, baseline: dict[str, int], outside_baseline: int) -> tuple[dict[str, int], int]:
    """`stats` and the outside fd count, polled until back at the baseline or SETTLE_SECONDS pass."""
    deadline = time.monotonic() + SETTLE_SECONDS
    while True:
        stats, outside = server_stats(url), fds_from_outside(pid)
        settled = (
            stats["tasks"] <= baseline["tasks"]
            and stats["response_handlers"] <= baseline["response_handlers"]
            and stats["open_fds"] <= baseline["open_fds"] + FD_TOLERANCE
            and outside <= outside_baseline + FD_TOLERANCE
        )
        if settled or time.monotonic() > deadline:
            return stats, outside
        time.sleep(0.1)


# --- the load ----------------------------------------------------------------------------


def reset_on_close(response: httpx.Response) -> None:
    """Make the coming close an abortive one (RST), as a crashed client's would be."""
    sock = response.extensions["network_stream"].get_extra_info("socket")
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


async def one_stream(client: httpx.AsyncClient, prompt: str, cut: tuple[int, str] | None) -> Stream:
    """Read a stream frame by frame; with `cut` = (frames, how), leave after that many frames."""
    async with client.stream("POST", "/assist", json=new_body(prompt)) as response:
        stream = await aread_response(response, stop_after=None if cut is None else cut[0])
        if cut is not None and cut[1] == "reset":
            reset_on_close(response)
        return stream  # leaving the block closes the connection (mid-stream, for a cut one)


async def run_load(url: str, count: int, cuts: dict[int, tuple[int, str]]) -> list[Stream | BaseException]:
    gate = uuid.uuid4().hex
    limits = httpx.Limits(max_connections=count + 10, max_keepalive_connections=0)
    timeout = httpx.Timeout(60.0)  # generous for a busy machine; a stream silent this long hangs
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=timeout) as client:
        streams = [
            one_stream(
                client,
                f"paced:{VICTIM_CHUNKS if i in cuts else CHUNKS}:{PAUSE_MS}:{gate}:{count}",
                cuts.get(i),
            )
            for i in range(count)
        ]
        return await asyncio.gather(*streams, return_exceptions=True)


def plan_cuts(count: int, rng: random.Random) -> dict[int, tuple[int, str]]:
    """A random third, each cut after 3 to CHUNKS frames (past the gate), by close or by reset."""
    victims = rng.sample(range(count), count // 3)
    return {i: (rng.randint(3, CHUNKS), rng.choice(["close", "reset"])) for i in victims}


# --- what each stream must hold ----------------------------------------------------------


def assert_in_order(stream: Stream, count: int) -> None:
    """The frames so far are a prefix of: chunk 0, GATE (opened by all), chunks 1.., last chunk, done."""
    assert stream.status == 200, stream.raw[:300]
    events = stream.events
    ids = [event["id"] for event in events]
    assert all(a < b for a, b in itertools.pairwise(ids)), "event ids must strictly increase"
    assert events[1]["event_name"] == "GATE"
    gate = events[1]["content"]
    assert gate["opened"] and gate["arrived"] >= count, f"not all {count} streams were open at once: {gate}"
    chunks = [event for event in events if event["content_type"] == "chunked.text"]
    assert [c["event_name"] for c in chunks] == ["FINAL_RESPONSE"] * len(chunks)
    assert len({c["stream_id"] for c in chunks}) == 1
    open_chunks = [c for c in chunks if not c["is_complete"]]
    assert [c["content"] for c in open_chunks] == [f"{i} " for i in range(len(open_chunks))]


def assert_complete(stream: Stream, count: int) -> None:
    assert_in_order(stream, count)
    assert stream.names() == ["FINAL_RESPONSE", "GATE"] + ["FINAL_RESPONSE"] * CHUNKS + ["done"]
    chunks = [event for event in stream.events if event["content_type"] == "chunked.text"]
    assert [c["is_complete"] for c in chunks] == [False] * CHUNKS + [True]
    assert chunks[-1]["content"] == ""
    assert stream.events[-1]["content_type"] == "atomic.done"
    assert stream.raw.endswith(b"\n\n") and stream.raw.count(b"event: done\n") == 1


def check_load(results: list, count: int, cuts: dict[int, tuple[int, str]]) -> None:
    failures = [(i, r) for i, r in enumerate(results) if isinstance(r, BaseException)]
    assert not failures, f"{len(failures)} streams failed, first: {failures[0][1]!r}"
    for index, stream in enumerate(results):
        try:
            if index in cuts:
                assert_in_order(stream, count)
                assert len(stream.frames) == cuts[index][0]
            else:
                assert_complete(stream, count)
        except AssertionError as error:
            raise AssertionError(f"stream {index} (cut: {cuts.get(index)}): {error}") from None


# --- the test ----------------------------------------------------------------------------


def test_500_streams_with_a_third_cut_all_survivors_complete_and_nothing_leaks(load_server):
    url, pid = load_server.url, load_server.process.pid
    rng = random.Random(SEED)

    # Warm up: the first streams create what the process keeps for good (sse-starlette's
    # shutdown watcher, metric series, lazily imported modules, allocator arenas).
    warm_cuts = plan_cuts(30, rng)
    check_load(asyncio.run(run_load(url, 30, warm_cuts)), 30, warm_cuts)
    baseline = steady_stats(url)
    outside_before = fds_from_outside(pid)
    metrics_before = metrics(url)
    assert baseline["response_handlers"] == 1, f"only the stats request's own handler: {baseline}"

    cuts = plan_cuts(STREAMS, rng)
    results = asyncio.run(run_load(url, STREAMS, cuts))
    check_load(results, STREAMS, cuts)

    after, outside_after = settled_stats(url, pid, baseline, outside_before)
    report = f"before {baseline} ({outside_before} fds from outside), after {after} ({outside_after})"
    print(report)
    # Like with like: both readings are taken from inside a `stats` request, which has its
    # own tasks (the agent, sse-starlette's), handler and connection.
    assert after["tasks"] == baseline["tasks"], "asyncio tasks left behind: " + report
    assert after["response_handlers"] == baseline["response_handlers"] == 1, "handlers left behind: " + report
    assert abs(after["open_fds"] - baseline["open_fds"]) <= FD_TOLERANCE, "fds left open: " + report
    assert abs(outside_after - outside_before) <= FD_TOLERANCE, "fds left open (/proc): " + report
    assert after["rss_kb"] - baseline["rss_kb"] < RSS_GROWTH_LIMIT_KB, "memory grew: " + report

    counted = metrics(url)

    def grew(name: str) -> float:
        return counted.get(name, 0.0) - metrics_before.get(name, 0.0)

    assert counted["assist_streams_open"] == 0
    assert grew("assist_disconnects_total") == len(cuts), "every cut stream, and only those, is a disconnect"
    assert grew('assist_http_requests_total{status="200"}') >= STREAMS
    assert not any(name.startswith('assist_http_requests_total{status="5') for name in counted)
    assert grew("assist_agent_errors_total") == 0 and grew("assist_timeouts_total") == 0

    log = load_server.log()
    assert "Traceback" not in log and " ERROR " not in log, log[-5000:]
