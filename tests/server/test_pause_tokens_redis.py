"""A pause is answered once across replicas that share ASSIST_REDIS_URL (issue 23, item 5): two
real service processes of the agent `alpha`, one real redis-server. The continuations mark a
file each (tests/server/pause_agents.py): what ran is counted there."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sentient_assist.server.answered_pauses import ANSWERED_KEY
from tests.server import pause_agents
from tests.server.test_pause_tokens import REPLAYS, SECRET, Served, assert_already_answered, resumed_document
from tests.support.redis_server import RunningRedis, running_redis
from tests.support.server import running_server

pytestmark = pytest.mark.timeout(90)


@pytest.fixture
def redis() -> Iterator[RunningRedis]:
    with running_redis() as server:
        yield server


def replica(redis_url: str, marks: Path):
    env = {
        "ASSIST_AGENT": "tests.server.pause_agents:alpha",
        "ASSIST_RESUME_SECRET": SECRET,
        "ASSIST_REDIS_URL": redis_url,
        "ASSIST_LOG_LEVEL": "warning",
        pause_agents.MARKS: str(marks),
    }
    return running_server(env)


async def test_replays_sent_to_two_replicas_at_once_run_the_continuation_once(redis: RunningRedis, tmp_path: Path):
    marks = tmp_path / "alpha.marks"
    with replica(redis.url, marks) as first, replica(redis.url, marks) as second:
        one, two = Served(first, marks), Served(second, marks)
        paused = await one.agent().run("hello")
        assert paused.interrupt is not None
        answers = [(one if i % 2 else two).agent().resume(paused, "Oslo") for i in range(REPLAYS)]
        results = await asyncio.gather(*answers)
        resumed = [result for result in results if not result.errors]
        assert len(resumed) == 1 and resumed_document(resumed[0]) is not None
        for result in results:
            if result.errors:
                assert_already_answered(result)
        assert len(one.ran()) == 1
        # Later, on the other replica than the one that answered: refused too.
        assert_already_answered(await two.agent().resume(paused, "Oslo"))
        assert_already_answered(await one.agent().resume(paused, "Oslo"))
        assert len(one.ran()) == 1
        # What Redis holds: the one answered id, scored by its token's expiry, in a key that never
        # expires (so that no volatile-* eviction can take it: test_redis_quotas.py).
        (_answered, expires_at) = redis.command("ZRANGE", ANSWERED_KEY, "0", "-1", "WITHSCORES").split()
        assert 0 < float(expires_at) - time.time() <= 86_400
        assert redis.command("TTL", ANSWERED_KEY) == "-1"


async def test_with_redis_down_an_answer_is_refused_to_try_again_and_nothing_runs(tmp_path: Path):
    marks = tmp_path / "alpha.marks"
    with running_redis() as redis, replica(redis.url, marks) as server:
        served = Served(server, marks)
        paused = await served.agent().run("hello")
        redis.kill()
        refused = await served.agent().resume(paused, "Oslo")
        (error,) = refused.errors
        assert error.code == 503 and "try again" in error.message and error.details["refused"] == "resume"
        assert served.ran() == []
        assert "Traceback" not in server.log()
