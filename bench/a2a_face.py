"""What a token costs through /a2a at a model's pace, against /assist, in one run on one server.

    python -m bench.a2a_face            # 4 streams of 500 chunks each way, a chunk every 2 ms
    python -m bench.a2a_face --quick    # a smoke run

bench/faces.py measures the faces with an agent that emits as fast as the server takes, so
/a2a's updates each carry many chunks. A model's tokens come one at a time instead: this serves
`PacedAgent` (`stream:N`: a 16-character chunk, then a 2 ms pause, N times) and measures the server's CPU
time per chunk for the same answer through each face (C answers at once, the faces in turn),
and how many artifact updates /a2a sent for them (it sends a run's events at most every
UPDATE_INTERVAL_SECONDS; bench/README.md, "/a2a").
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from pathlib import Path

from bench import client
from bench.faces import FACES, ask
from bench.servers import Server
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


async def measure(server: Server, loads: dict[str, int]) -> dict[str, dict[str, float]]:
    chunks, concurrency, rounds = loads["chunks"], loads["concurrency"], loads["rounds"]
    prompt = f"stream:{chunks}"
    faces = {name: FACES[name] for name in ("assist", "a2a")}
    cpu = dict.fromkeys(faces, 0.0)
    updates: dict[str, int] = {}
    for name, face in faces.items():  # warm up, and count what one answer holds
        answer = await ask(server.port, face, prompt)
        updates[name] = answer.count(b'"kind":"artifact-update"') if name == "a2a" else answer.count(b"chunked.text")
    for _ in range(rounds):
        for name, face in faces.items():
            before = server.cpu_seconds()
            await asyncio.gather(*(ask(server.port, face, prompt) for _ in range(concurrency)))
            cpu[name] += server.cpu_seconds() - before
    total = rounds * concurrency * chunks
    return {
        name: {"cpu_us_per_chunk": cpu[name] / total * 1e6, "updates_per_answer": updates[name], "chunks": chunks}
        for name in faces
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small loads: a smoke run")
    options = parser.parse_args()
    loads = QUICK if options.quick else FULL
    log = Path(tempfile.gettempdir()) / "bench-a2a-face-server.log"
    server = Server(
        key="ours",
        label="ours",
        command=[sys.executable, "-m", "app", "serve"],
        env={"ASSIST_AGENT": "bench.a2a_face:PacedAgent", "ASSIST_LOG_LEVEL": "warning"},
        log_path=log,
    )
    server.start()
    try:
        with asyncio.Runner(loop_factory=client.loop_factory()) as runner:
            runner.run(server.wait_ready())
            print(f"{loads}; server log {log}", file=sys.stderr)
            results = runner.run(measure(server, loads))
    finally:
        server.stop()
    print(f"{'face':>8}  {'CPU/chunk':>10}  {'sends/answer':>12}")
    for name, figures in results.items():
        sends = f"{figures['updates_per_answer']}/{figures['chunks']}"
        print(f"{'/' + name:>8}  {figures['cpu_us_per_chunk']:>7.0f} us  {sends:>12}")
    print(json.dumps(results), file=sys.stderr)


if __name__ == "__main__":
    main()
