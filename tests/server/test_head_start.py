"""A run's agent takes its first step before the next request's work begins (runtime/head_start.py):
HeadStart itself, then the service under a real uvicorn, with requests that arrive together."""

from __future__ import annotations

import asyncio
import socket
import time

import orjson
import pytest
from starlette.middleware import Middleware

from sentient_assist import AbstractAgent, Query, ResponseHandler, Session
from sentient_assist.runtime.head_start import HeadStart
from sentient_assist.server import Settings, create_app
from sentient_assist.server.head_start import HeadStartMiddleware
from tests.support.server import uvicorn_in_thread
from tests.support.waiting import wait_until


def test_a_request_goes_on_at_once_when_no_run_is_starting():
    async def main() -> list[str]:
        head_start = HeadStart()
        order: list[str] = []

        async def request() -> None:
            await head_start.turn()
            order.append("request")

        task = asyncio.create_task(request())
        order.append("created")
        await task
        return order

    # No wait of its own: the request's first step runs straight through.
    assert asyncio.run(main()) == ["created", "request"]


def test_requests_wait_for_the_first_step_of_the_runs_started_before_them_then_go_on_in_their_order():
    async def main() -> list[str]:
        head_start = HeadStart()
        order: list[str] = []

        async def agent(name: str) -> None:
            order.append(f"{name} step 1")
            await asyncio.sleep(0)
            order.append(f"{name} step 2")

        async def request(name: str) -> None:
            await head_start.turn()
            order.append(f"{name} admitted")
            task = asyncio.create_task(agent(name))
            head_start.started()
            await task

        # One run starting, then three requests queued behind it, in the order they came.
        first = asyncio.create_task(agent("run 0"))
        head_start.started()
        requests = [asyncio.create_task(request(f"r{n}")) for n in (1, 2, 3)]
        await asyncio.gather(first, *requests)
        return order

    order = asyncio.run(main())
    # Each request is admitted only after the run before it has taken its first step.
    assert order.index("run 0 step 1") < order.index("r1 admitted")
    assert order.index("r1 admitted") < order.index("r1 step 1") < order.index("r2 admitted")
    assert order.index("r2 step 1") < order.index("r3 admitted")
    assert [item for item in order if item.endswith("admitted")] == ["r1 admitted", "r2 admitted", "r3 admitted"]


def test_a_request_let_go_that_takes_its_turn_again_in_the_same_step_goes_on_ahead_of_the_ones_behind_it():
    async def main() -> list[str]:
        head_start = HeadStart()
        order: list[str] = []

        async def agent(name: str) -> None:
            order.append(f"{name} step 1")

        async def request(name: str) -> None:
            await head_start.turn()  # at the door
            order.append(f"{name} at the door")
            await head_start.turn()  # at admission, in the same step
            order.append(f"{name} admitted")
            task = asyncio.create_task(agent(name))
            head_start.started()
            await task

        first = asyncio.create_task(agent("run 0"))
        head_start.started()
        requests = [asyncio.create_task(request(f"r{n}")) for n in (1, 2, 3)]
        await asyncio.gather(first, *requests)
        return order

    order = asyncio.run(main())
    # Taken twice, the turn is still one: each request is admitted in the step it was let go in,
    # before the next goes past the door, and the requests keep their order.
    for n in (1, 2):
        assert order.index(f"r{n} at the door") + 1 == order.index(f"r{n} admitted")
        assert order.index(f"r{n} step 1") < order.index(f"r{n + 1} at the door")
    assert [item for item in order if item.endswith("admitted")] == ["r1 admitted", "r2 admitted", "r3 admitted"]


def test_a_waiter_that_starts_no_run_or_is_cancelled_does_not_hold_the_ones_behind_it():
    async def main() -> list[str]:
        head_start = HeadStart()
        order: list[str] = []

        async def refused() -> None:  # say, a 422: it never starts a run
            await head_start.turn()
            order.append("refused")

        async def slow_body() -> None:  # waits on something else after its turn
            await head_start.turn()
            order.append("slow body")
            await asyncio.sleep(0.05)

        async def plain() -> None:
            await head_start.turn()
            order.append("plain")

        waiters = [asyncio.create_task(plain()), asyncio.create_task(refused())]
        waiters += [asyncio.create_task(slow_body()), asyncio.create_task(plain())]

        async def starting() -> None:  # the run ahead of them: its client leaves the first waiter
            waiters[0].cancel()

        run = asyncio.create_task(starting())
        head_start.started()  # the four queue behind it
        await asyncio.wait_for(asyncio.gather(run, *waiters[1:]), 2)
        assert waiters[0].cancelled()
        return order

    assert asyncio.run(main()) == ["refused", "slow body", "plain"]


def test_what_was_pending_on_an_event_loop_that_stopped_is_forgotten_on_the_next():
    head_start = HeadStart()

    async def leave_a_run_starting() -> None:
        head_start.started()  # the loop stops before the callback that ends it runs

    loop = asyncio.new_event_loop()
    loop.run_until_complete(leave_a_run_starting())
    loop.close()

    async def request() -> str:
        await head_start.turn()
        return "admitted"

    assert asyncio.run(asyncio.wait_for(request(), 2)) == "admitted"


class CountsStartedRuns(AbstractAgent):
    """At its first step, notes how many of its runs have been started (their tasks are named after it)."""

    name = "counts-runs"
    description = "Test agent: how many of its runs exist when one takes its first step."

    def __init__(self) -> None:
        self.seen: list[tuple[str, int]] = []
        self.stepped: list[str] = []

    async def assist(self, session: Session, query: Query, response_handler: ResponseHandler) -> None:
        self.stepped.append(query.prompt)
        if query.prompt == "block":  # holds the event loop while the requests of the test come in
            time.sleep(0.3)  # noqa: ASYNC251 (the point: the loop is held)
        else:
            live = [task for task in asyncio.all_tasks() if task.get_name() == self.name and not task.done()]
            self.seen.append((query.prompt, len(live)))
        await response_handler.emit_text_block("FINAL_RESPONSE", query.prompt)
        await response_handler.complete()


def _post(path: str, body: bytes) -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode() + body


def _assist(prompt: str) -> bytes:
    return _post("/assist", orjson.dumps({"query": {"id": "01JDQ4Z8M7T3V5X9A2B4C6D8EF", "prompt": prompt}}))


def _chat_completion(prompt: str, model: str = CountsStartedRuns.name) -> bytes:
    body = {"model": model, "messages": [{"role": "user", "content": prompt}], "stream": True}
    return _post("/v1/chat/completions", orjson.dumps(body))


def _answer(sock: socket.socket) -> bytes:
    sock.settimeout(10)
    chunks = []
    while chunk := sock.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


@pytest.mark.parametrize("request_of", [_assist, _chat_completion], ids=["assist", "v1"])
def test_of_requests_that_arrive_together_the_first_one_s_agent_steps_before_the_others_start(request_of):
    agent = CountsStartedRuns()
    with uvicorn_in_thread(create_app(Settings(), agent)) as (_, address):
        blocker = socket.create_connection(address)
        together = [socket.create_connection(address) for _ in range(4)]
        blocker.sendall(_assist("block"))
        # The event loop is held by the blocking agent: the four arrive while it sleeps.
        assert wait_until(lambda: "block" in agent.stepped, 5)
        for number, sock in enumerate(together):
            sock.sendall(request_of(f"r{number}"))
        answers = [_answer(sock) for sock in [blocker, *together]]
        for number, answer in enumerate(answers[1:]):
            assert answer.startswith(b"HTTP/1.1 200 "), answer[:200]
            assert f"r{number}".encode() in answer
        # The four were read in one turn of the loop. The first one's agent took its step while
        # it was the only run of the four started; each next one after the run before it.
        assert [count for _, count in agent.seen] == [1, 1, 1, 1], agent.seen
        assert sorted(prompt for prompt, _ in agent.seen) == ["r0", "r1", "r2", "r3"]
        for sock in [blocker, *together]:
            sock.close()


class NotesItsFirstStep(AbstractAgent):
    """Notes that its first step has run, as an agent that calls a model sends its request then."""

    name = "notes-first-step"
    description = "Test agent: notes its first step."

    def __init__(self) -> None:
        self.stepped: list[str] = []

    async def assist(self, session: Session, query: Query, response_handler: ResponseHandler) -> None:
        self.stepped.append(query.prompt)
        if query.prompt == "block":  # holds the event loop while the requests of the test come in
            time.sleep(0.3)  # noqa: ASYNC251 (the point: the loop is held)
        await response_handler.emit_text_block("FINAL_RESPONSE", query.prompt)
        await response_handler.complete()


@pytest.mark.parametrize(
    "request_of", [_assist, lambda prompt: _chat_completion(prompt, NotesItsFirstStep.name)], ids=["assist", "v1"]
)
def test_requests_that_arrive_behind_a_starting_run_wait_for_its_first_step_before_any_middleware(request_of):
    agent = NotesItsFirstStep()
    app = create_app(Settings(), agent)
    at_entry: list[list[str]] = []  # what had stepped when each request reached the service's middleware

    class NotesEachEntry:  # put just inside the head start, where the access log is: the service's own work
        def __init__(self, app):
            self.app = app

        async def __call__(self, scope, receive, send):
            if scope["type"] == "http":
                at_entry.append(list(agent.stepped))
            await self.app(scope, receive, send)

    assert app.user_middleware[0].cls is HeadStartMiddleware  # outermost of the service's
    app.user_middleware.insert(1, Middleware(NotesEachEntry))
    with uvicorn_in_thread(app) as (_, address):
        blocker = socket.create_connection(address)
        together = [socket.create_connection(address) for _ in range(4)]
        blocker.sendall(_assist("block"))
        # The event loop is held by the blocking agent: the four arrive while it sleeps.
        assert wait_until(lambda: "block" in agent.stepped, 5)
        for number, sock in enumerate(together):
            sock.sendall(request_of(f"r{number}"))
        answers = [_answer(sock) for sock in [blocker, *together]]
        for number, answer in enumerate(answers[1:]):
            assert answer.startswith(b"HTTP/1.1 200 "), answer[:200]
            assert f"r{number}".encode() in answer
        for sock in [blocker, *together]:
            sock.close()
    # The four were read in one turn of the loop. Each went past the door only once the run
    # of the one before it had taken its first step (its model request sent, had it one).
    assert [len(stepped) for stepped in at_entry] == [0, 1, 2, 3, 4], at_entry
