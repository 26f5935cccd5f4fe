"""What a token costs through /a2a at a model's pace, against /assist, in one run on one server.

    python -m bench.a2a_face                            # 4 streams of 500 chunks each way, a chunk every 2 ms
    python -m bench.a2a_face --quick                    # a smoke run
    python -m bench.a2a_face --redis --baseline HEAD~1  # tasks in Redis, against the commit before

bench/faces.py measures the faces with an agent that emits as fast as the server takes, so
/a2a's updates each carry many chunks. A model's tokens come one at a time instead: this serves
`PacedAgent` (`stream:N`: a 16-character chunk, then a 2 ms pause, N times) and measures the server's CPU
time per chunk for the same answer through each face (C answers at once, the faces in turn),
and how many artifact updates /a2a sent for them (it sends a run's events at most every
UPDATE_INTERVAL_SECONDS; bench/README.md, "/a2a").

With `--redis`, the server keeps its A2A tasks in a redis-server of the run's own
(ASSIST_REDIS_URL), and Redis's CPU per chunk is counted too. With `--baseline REV`, REV is
served as well, from a temporary git worktree (the same interpreter and packages, its tree
first on PYTHONPATH), and measured in the same rounds, the servers taking turns.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import tempfile
from pathlib import Path

from bench import client
from bench.faces import FACES, ask
from bench.resumable import redis_wait, start_redis
from bench.servers import HOST, Server, worktree
from sentient_assist import AbstractAgent

FULL = {"chunks": 500, "concurrency": 4, "rounds": 3}
QUICK = {"chunks": 100, "concurrency": 2, "rounds": 1}
PAUSE_SECONDS = 0.002
CHUNK = "0123456789abcdef"


class PacedAgent(AbstractAgent):
    """`stream:N`: N chunks of CHUNK, PAUSE_SECONDS apart, then the stream's end and done."""

    name = "paced"
    description = "Streams N chunks, one every 2 ms."

    async def assist(self, session, query, response_handler) -> None:  # type: ignore[no-untyped-def]
        stream = response_handler.create_text_stream("FINAL_RESPONSE")
        for _ in range(int(query.prompt.rpartition(":")[2])):
            await stream.emit_chunk(CHUNK)
            await asyncio.sleep(PAUSE_SECONDS)
        await stream.complete()
        await response_handler.complete()


async def measure(servers: list[Server], loads: dict[str, int], redis: Server | None) -> dict[str, dict]:
    """Per server (by label), per face: the server's CPU per chunk (and Redis's, with one), and
    the sends an answer took."""
    chunks, concurrency, rounds = loads["chunks"], loads["concurrency"], loads["rounds"]
    prompt = f"stream:{chunks}"
    faces = {name: FACES[name] for name in ("assist", "a2a")}
    cpu = {(server.label, name): 0.0 for server in servers for name in faces}
    redis_cpu = dict.fromkeys(cpu, 0.0)
    updates: dict[tuple[str, str], int] = {}
    for server in servers:
        for name, face in faces.items():  # warm up, and count what one answer holds
            answer = await ask(server.port, face, prompt)
            sends = answer.count(b'"kind":"artifact-update"') if name == "a2a" else answer.count(b"chunked.text")
            updates[server.label, name] = sends
    for _ in range(rounds):
        for server in servers:
            for name, face in faces.items():
                before, redis_before = server.cpu_seconds(), redis.cpu_seconds() if redis else 0.0
                await asyncio.gather(*(ask(server.port, face, prompt) for _ in range(concurrency)))
                cpu[server.label, name] += server.cpu_seconds() - before
                if redis is not None:
                    redis_cpu[server.label, name] += redis.cpu_seconds() - redis_before
    total = rounds * concurrency * chunks
    results: dict[str, dict] = {}
    for (label, name), seconds in cpu.items():
        results.setdefault(label, {})[name] = {
            "cpu_us_per_chunk": seconds / total * 1e6,
            "redis_cpu_us_per_chunk": redis_cpu[label, name] / total * 1e6 if redis else None,
            "updates_per_answer": updates[label, name],
            "chunks": chunks,
        }
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small loads: a smoke run")
    parser.add_argument("--redis", action="store_true", help="A2A tasks in a redis-server of the run's own")
    parser.add_argument("--baseline", help="a git revision to serve and measure beside this tree")
    options = parser.parse_args()
    loads = QUICK if options.quick else FULL
    workdir = Path(tempfile.mkdtemp(prefix="bench-a2a-face-"))
    env = {"ASSIST_AGENT": "bench.a2a_face:PacedAgent", "ASSIST_LOG_LEVEL": "warning"}
    command = [sys.executable, "-m", "app", "serve"]
    redis: Server | None = None
    servers = [Server("ours", "this tree", command, env, workdir / "ours.log")]
    with contextlib.ExitStack() as stack:
        if options.redis:
            redis = start_redis(workdir)
            stack.callback(redis.stop)
            redis_wait(redis.port)
            env["ASSIST_REDIS_URL"] = f"redis://{HOST}:{redis.port}/0"
        if options.baseline:
            tree = stack.enter_context(worktree(options.baseline, workdir / "baseline"))
            baseline_env = {**env, "PYTHONPATH": str(tree)}
            baseline = Server("baseline", options.baseline, command, baseline_env, workdir / "baseline.log", cwd=tree)
            servers.append(baseline)
        for server in servers:
            stack.callback(server.stop)
            server.start()
        with asyncio.Runner(loop_factory=client.loop_factory()) as runner:
            for server in servers:
                runner.run(server.wait_ready())
            print(f"{loads}; logs in {workdir}", file=sys.stderr)
            results = runner.run(measure(servers, loads, redis))
    print(f"{'build':>12}  {'face':>8}  {'CPU/chunk':>10}  {'Redis/chunk':>11}  {'sends/answer':>12}")
    for label, faces in results.items():
        for name, figures in faces.items():
            sends = f"{figures['updates_per_answer']}/{figures['chunks']}"
            in_redis = figures["redis_cpu_us_per_chunk"]
            shown = f"{in_redis:>8.1f} us" if in_redis is not None else f"{'-':>11}"
            print(f"{label:>12}  {'/' + name:>8}  {figures['cpu_us_per_chunk']:>7.0f} us  {shown}  {sends:>12}")
    print(json.dumps(results), file=sys.stderr)


if __name__ == "__main__":
    main()
