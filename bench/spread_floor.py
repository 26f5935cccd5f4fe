"""What four requests spread out cost a real model server's first answer, with nobody in between:
the floor under issue 28's 4-client target for any service that does work for each request
before sending it on.

    python -m bench.spread_floor                     # about 5 minutes on 2 cores
    python -m bench.spread_floor --spreads 0.5 0.9   # gaps to try, in ms

llama.cpp's server as in bench/real_model.py (SmolLM2, one thread, requests queued). Each round
is one prompt, four times, straight to the model server: once with the four sent at once (the
direct path), and once for each gap, the four sent that many milliseconds apart, as a service
sends its four model requests when it does its work for each request in turn. The figure is
the first served stream's time to first token against the direct round's (twins, as in
bench/real_model.py: measured moments apart, in the same state of the model), what the spread
adds to it. bench/README.md has the reading.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

from bench.real_model import PROMPTS, Paths, Reading, collector_paused, llama_command, log, read_one, wait_serving
from bench.report import percentile
from bench.servers import HOST, Server

DIRECT = "direct"
SPREADS_MS = (0.25, 0.5, 0.9, 1.5)


def label(spread_ms: float) -> str:
    return f"spread {spread_ms:g} ms"


async def measure(paths: Paths, rounds: int, spreads_ms: list[float]) -> dict[str, list[Reading]]:
    """Per path (direct, then each gap), the first served stream of each round."""
    gaps = {DIRECT: 0.0, **{label(ms): ms / 1000 for ms in spreads_ms}}
    firsts: dict[str, list[Reading]] = {name: [] for name in gaps}
    connector = aiohttp.TCPConnector(limit=0, keepalive_timeout=2)  # as bench/real_model.py, for the same reason
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=120), connector=connector) as session:
        for prompt in PROMPTS:  # warm up
            await read_one(session, paths, DIRECT, prompt)
        names = list(gaps)
        for number in range(rounds):
            prompt = PROMPTS[number % len(PROMPTS)]
            for name in names[number % len(names) :] + names[: number % len(names)]:
                await read_one(session, paths, DIRECT, prompt, 1)  # the model's state: this prompt, evaluated
                with collector_paused():
                    four = await asyncio.gather(
                        *(read_one(session, paths, DIRECT, prompt, after=k * gaps[name]) for k in range(4))
                    )
                firsts[name].append(min(four, key=lambda r: r.ttft))
            if (number + 1) % 10 == 0:
                log(f"{number + 1}/{rounds} rounds")
    return firsts


def added(firsts: dict[str, list[Reading]]) -> dict[str, dict[str, float]]:
    direct = firsts[DIRECT]
    out = {"direct, first served": {"ttft_p50_ms": percentile([r.ttft * 1000 for r in direct], 0.5)}}
    for name, readings in firsts.items():
        if name == DIRECT:
            continue
        differences = [(a.ttft - b.ttft) * 1000 for a, b in zip(readings, direct, strict=True)]
        out[name] = {
            "ttft_p50_ms": percentile([r.ttft * 1000 for r in readings], 0.5),
            "added_ttft_p50_ms": percentile(differences, 0.5),
            "added_ttft_p99_ms": percentile(differences, 0.99),
        }
    return out


async def main_async(args: argparse.Namespace) -> dict:
    command = llama_command(threads=1)
    log_dir = Path(tempfile.mkdtemp(prefix="bench-spread-floor-"))
    llama = Server("llama", "llama.cpp", command, {}, log_dir / "llama.log")
    llama.start()
    try:
        await wait_serving(f"http://{HOST}:{llama.port}/v1/models", llama)
        load_before = os.getloadavg()[0]
        started = time.monotonic()
        # Paths' other addresses are not used here: every request goes to the model server.
        firsts = await measure(Paths(llama.port, llama.port, llama.port), args.rounds, args.spreads)
        seconds = time.monotonic() - started
    finally:
        llama.stop()
    return {
        "rounds": args.rounds,
        "seconds": round(seconds, 1),
        "load_average": [load_before, os.getloadavg()[0]],
        "first_served": added(firsts),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.spread_floor", description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=40, help="rounds of each path (default 40)")
    parser.add_argument(
        "--spreads", type=float, nargs="+", default=list(SPREADS_MS), help="gaps between the four requests, in ms"
    )
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    args = parser.parse_args(argv)
    if any(ms <= 0 for ms in args.spreads):
        parser.error("--spreads: each gap must be more than 0 ms (0 is the direct path, measured anyway)")
    results = asyncio.run(main_async(args))
    if args.out is not None:
        args.out.write_text(json.dumps(results, indent=2) + "\n")
    print("| four sent | first served TTFT p50, ms | added p50, ms | added p99, ms |")
    print("|---|---:|---:|---:|")
    for name, row in results["first_served"].items():
        extra = " | "  # the direct row: nothing added
        if "added_ttft_p50_ms" in row:
            extra = f"{row['added_ttft_p50_ms']:+.2f} | {row['added_ttft_p99_ms']:+.2f}"
        print(f"| {name} | {row['ttft_p50_ms']:.2f} | {extra} |")
    log(f"{results['seconds']} s, load average {results['load_average'][0]:.2f} -> {results['load_average'][1]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
