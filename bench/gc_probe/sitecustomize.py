"""The garbage collector's passes in a server the bench starts with this folder on PYTHONPATH
(`python -m bench.relay --gc`): Python imports `sitecustomize` at start-up, before the server's
own code. Each collection is noted (its generation, when it began, its wall and CPU time), and
the list is written as JSON to $BENCH_GC_LOG when the process exits (atexit: stop the server with
SIGINT, as uvicorn ends a SIGTERM by raising it again). Nothing is noted without BENCH_GC_LOG."""

import atexit
import gc
import json
import os
import time

_PATH = os.environ.get("BENCH_GC_LOG")

if _PATH:
    _collections: list[tuple[int, float, float, float]] = []  # (generation, began, wall s, cpu s)
    _began = [0.0, 0.0]

    def _note(phase: str, info: dict) -> None:
        if phase == "start":
            _began[0], _began[1] = time.time(), time.thread_time()
        else:
            wall, cpu = time.time() - _began[0], time.thread_time() - _began[1]
            _collections.append((info["generation"], _began[0], wall, cpu))

    def _write() -> None:
        with open(_PATH, "w") as f:
            json.dump(_collections, f)

    gc.callbacks.append(_note)
    atexit.register(_write)
