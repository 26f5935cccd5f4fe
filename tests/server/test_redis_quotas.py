"""What one key may leave in the Redis the replicas share, and what Redis may not take away (issue
40, item 3), against real redis-servers and real uvicorn processes: each key's quota of resumable
runs (ASSIST_RUNS_MAX_PER_KEY, ASSIST_RUNS_MAX_BYTES_PER_KEY); an answered pause still answered
after another key's runs filled a Redis whose `maxmemory-policy` is volatile-lru (a managed
Redis's usual policy); and the start refused under an `allkeys-*` policy, which may evict it."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from sentient_assist.server.answered_pauses import ANSWERED_KEY
from tests.server.test_pause_tokens import Served, assert_already_answered, resumed_document
from tests.server.test_pause_tokens_redis import replica
from tests.server.test_resumable_runs import resumable_env
from tests.server.test_stream_guarantees import assert_well_ended
from tests.support.redis_server import RunningRedis, running_redis
from tests.support.server import ROOT, Servers, clean_env, free_port
from tests.support.sse import new_body, read_stream

pytestmark = pytest.mark.timeout(120)

KEY, OTHER_KEY = "redis-quota-key-one", "redis-quota-key-two"
BLOCKS, BLOCK_BYTES = 50, 10_000  # one run of the counting agent: about 500 KB in Redis


@pytest.fixture
def redis() -> Iterator[RunningRedis]:
    """A redis-server of the test's own: each test sets its memory and policy."""
    with running_redis() as server:
        yield server


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def test_past_its_count_of_runs_a_key_is_refused_503_naming_the_setting_and_another_key_is_served(
    serve: Servers, redis: RunningRedis
) -> None:
    env = resumable_env(redis_url=redis.url, api_keys=f"{KEY},{OTHER_KEY}", runs_max_per_key="3")
    url = serve(env).url
    for _ in range(3):  # ended runs are kept for their replays (ASSIST_RUN_RETENTION): they count
        assert_well_ended(read_stream(url, new_body("count:2:0"), headers=bearer(KEY)))
    refused = httpx.post(f"{url}/assist", json=new_body("count:2:0"), headers=bearer(KEY), timeout=30)
    assert refused.status_code == 503, refused.text
    assert "ASSIST_RUNS_MAX_PER_KEY" in refused.json()["detail"]
    assert 0 < int(refused.headers["Retry-After"]) <= 300
    # Another key is served, and its run is in Redis for a resume elsewhere.
    served = read_stream(url, new_body("count:2:0"), headers=bearer(OTHER_KEY))
    assert_well_ended(served)
    assert redis.command("EXISTS", "assist:run:{" + served.headers["assist-run"] + "}:meta") == "1"


def test_a_run_that_takes_its_key_past_its_bytes_ends_507_and_the_next_is_refused(
    serve: Servers, redis: RunningRedis
) -> None:
    quota = 200_000
    env = resumable_env(redis_url=redis.url, api_keys=f"{KEY},{OTHER_KEY}", runs_max_bytes_per_key=str(quota))
    url = serve(env).url
    # Paced, so that Redis has its first blocks while it runs: it is ended there, not at its end.
    stream = read_stream(url, new_body(f"big:{BLOCKS}:{BLOCK_BYTES}:20"), headers=bearer(KEY))
    assert_well_ended(stream)
    (error,) = [event for event in stream.events if event["event_name"] == "error"]
    assert error["content"]["error_code"] == 507
    assert "ASSIST_RUNS_MAX_BYTES_PER_KEY" in error["content"]["error_message"]
    assert sum(len(frame.data) for frame in stream.frames) < BLOCKS * BLOCK_BYTES
    refused = httpx.post(f"{url}/assist", json=new_body("count:2:0"), headers=bearer(KEY), timeout=30)
    assert refused.status_code == 503 and "ASSIST_RUNS_MAX_BYTES_PER_KEY" in refused.json()["detail"]
    assert_well_ended(read_stream(url, new_body("count:2:0"), headers=bearer(OTHER_KEY)))


async def test_another_keys_runs_filling_a_volatile_lru_redis_do_not_evict_an_answered_pause(
    serve: Servers, redis: RunningRedis, tmp_path: Path
) -> None:
    redis.command("CONFIG", "SET", "maxmemory", "40mb")
    redis.command("CONFIG", "SET", "maxmemory-policy", "volatile-lru")
    marks = tmp_path / "alpha.marks"
    with replica(redis.url, marks) as pauses:
        served = Served(pauses, marks)
        paused = await served.agent().run("hello")
        assert paused.interrupt is not None
        resumed = await served.agent().resume(paused, "Oslo")
        assert resumed_document(resumed) is not None and len(served.ran()) == 1
        # Another tenant's resumable runs, kept 300 s with an expiry, fill Redis past its maxmemory.
        runs = serve(resumable_env(redis_url=redis.url, api_keys=OTHER_KEY)).url
        for _ in range(120):  # bounded: about 60 MB sent into a Redis of 40
            read_stream(runs, new_body(f"big:{BLOCKS}:{BLOCK_BYTES}"), headers=bearer(OTHER_KEY))
            if int(redis.info("stats")["evicted_keys"]) > 20:
                break
        assert int(redis.info("stats")["evicted_keys"]) > 20, "Redis never had to evict"
        # The answered pause is still answered: its replay is refused and nothing runs twice.
        assert redis.command("TTL", ANSWERED_KEY) == "-1"
        assert_already_answered(await served.agent().resume(paused, "Oslo"))
        assert len(served.ran()) == 1


@pytest.mark.parametrize("policy", ["allkeys-lru", "allkeys-random"])
def test_under_an_allkeys_policy_the_service_does_not_start_and_names_the_policy_and_the_fix(
    redis: RunningRedis, policy: str
) -> None:
    redis.command("CONFIG", "SET", "maxmemory-policy", policy)
    env = clean_env({"ASSIST_REDIS_URL": redis.url, "ASSIST_PORT": str(free_port())})
    done = subprocess.run(
        [sys.executable, "-m", "app", "serve"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 2, done.stderr
    assert "ASSIST_REDIS_URL" in done.stderr and policy in done.stderr and "volatile-lru" in done.stderr
    assert "docs/deploying.md#redis" in done.stderr and "Traceback" not in done.stderr
