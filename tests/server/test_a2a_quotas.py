"""What one key may keep of A2A tasks (ASSIST_A2A_MAX_TASKS_PER_KEY, ASSIST_A2A_MAX_TASK_BYTES_PER_KEY),
in this process and in a real redis-server, and ListTasks reading only its page (issue 40), against a
real uvicorn serving tests/server/a2a_agents.py's A2AFaceAgent, with a2a-sdk's own client."""

from __future__ import annotations

import pytest
from a2a.types.a2a_pb2 import ListTasksRequest, TaskState
from a2a.utils.errors import A2AError

from tests.server.test_a2a_face import AGENT, a2a_client, responses, user_message
from tests.support.redis_server import RunningRedis, redis_server  # noqa: F401 - a fixture
from tests.support.server import Servers

pytestmark = pytest.mark.timeout(120)

KEY, OTHER_KEY = "a2a-quota-key-one", "a2a-quota-key-two"
MAX_TASKS, MAX_BYTES = 3, 150_000
PROMPT_BYTES = 60_000


async def send(url: str, key: str, text: str) -> TaskState.ValueType:
    """One message, answered (no stream): the state its task is left in."""
    async with a2a_client(url, key=key, streaming=False) as client:
        [item] = await responses(client, user_message(text))
    return item.task.status.state


@pytest.mark.parametrize("shared", [False, True], ids=["in memory", "in redis"])
async def test_past_its_quota_a_key_is_refused_naming_the_setting_and_another_key_is_served(
    shared: bool, serve: Servers, request: pytest.FixtureRequest
) -> None:
    env = {
        **AGENT,
        "ASSIST_API_KEYS": f"{KEY},{OTHER_KEY}",
        "ASSIST_MAX_BODY_BYTES": "131072",
        "ASSIST_A2A_MAX_TASKS_PER_KEY": str(MAX_TASKS),
        "ASSIST_A2A_MAX_TASK_BYTES_PER_KEY": str(MAX_BYTES),
    }
    if shared:
        redis: RunningRedis = request.getfixturevalue("redis_server")
        redis.command("FLUSHALL")
        env["ASSIST_REDIS_URL"] = redis.url
    url = serve(env).url
    # Tasks waiting for input are not forgotten: past the count, a new one is refused, naming it.
    for index in range(MAX_TASKS):
        assert await send(url, KEY, f"ask:{index}") == TaskState.TASK_STATE_INPUT_REQUIRED
    with pytest.raises(A2AError, match=rf"keeps {MAX_TASKS} A2A tasks \(ASSIST_A2A_MAX_TASKS_PER_KEY\)"):
        await send(url, KEY, "ask:one too many")
    # The other key is served, and its finished tasks give way to its new ones.
    for _ in range(MAX_TASKS + 2):
        assert await send(url, OTHER_KEY, "answer") == TaskState.TASK_STATE_COMPLETED
    async with a2a_client(url, key=OTHER_KEY, streaming=False) as client:
        listed = await client.list_tasks(ListTasksRequest())
    assert listed.total_size == MAX_TASKS
    # Its bytes: large tasks waiting for input fill them; the next is refused naming the setting.
    with pytest.raises(A2AError, match="ASSIST_A2A_MAX_TASK_BYTES_PER_KEY"):
        for _ in range(MAX_BYTES // PROMPT_BYTES + 1):  # bounded: refused by then, whichever store
            await send(url, OTHER_KEY, "ask:" + "x" * PROMPT_BYTES)
    if shared:
        # What Redis holds of them: no more tasks than the two quotas allow.
        assert len(redis.command("KEYS", "sentient_assist:a2a:task:*").split()) <= 2 * MAX_TASKS


async def test_list_tasks_reads_the_page_asked_for_not_every_task_of_the_key(
    serve: Servers,
    redis_server: RunningRedis,  # noqa: F811
) -> None:
    redis_server.command("FLUSHALL")
    env = {**AGENT, "ASSIST_API_KEYS": KEY, "ASSIST_MAX_BODY_BYTES": "131072", "ASSIST_REDIS_URL": redis_server.url}
    url = serve(env).url
    count = 30
    for index in range(count):
        assert await send(url, KEY, f"echo-history:{index}:" + "x" * PROMPT_BYTES) == TaskState.TASK_STATE_COMPLETED
    (task_key, *_) = redis_server.command("KEYS", "sentient_assist:a2a:task:*").split()
    task_bytes = int(redis_server.command("HSTRLEN", task_key, "d"))
    assert task_bytes > 2 * PROMPT_BYTES  # its message and its answer
    async with a2a_client(url, key=KEY, streaming=False) as client:
        sent_before = int(redis_server.info("stats")["total_net_output_bytes"])
        page = await client.list_tasks(ListTasksRequest(page_size=1))
        read = int(redis_server.info("stats")["total_net_output_bytes"]) - sent_before
        assert page.total_size == count and len(page.tasks) == 1 and page.next_page_token
        # Redis sent one task, and the key's listing (a few dozen bytes a task): not all thirty.
        assert read < task_bytes + 100 * count + 16_384, (read, task_bytes)
        # The pages, walked with their tokens, are every task once, the newest first.
        seen, token = [], ""
        for _ in range(count):  # bounded: ten pages of three
            listed = await client.list_tasks(ListTasksRequest(page_size=3, page_token=token))
            seen += [task.id for task in listed.tasks]
            token = listed.next_page_token
            if not token:
                break
    assert len(seen) == len(set(seen)) == count and seen[0] == page.tasks[0].id
