"""examples/ run as the README says, and print what each part shows."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_seed_concepts_example_runs_offline_and_shows_each_concept():
    done = subprocess.run(
        [sys.executable, "examples/seed_concepts.py"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""  # no agent failed, nothing logged as an error
    lines = dict(line.split(": ", 1) for line in done.stdout.splitlines())
    assert lines["execute"] == "Sunny in Lima"
    assert lines["upstream_slush"] == "The sky is sunny: wear sunglasses"
    assert lines["broadcast"] == "[('Weather', 'ok'), ('Outfit', 'ok')]"
    assert lines["chain"] == "The sky is sunny: wear sunglasses"
    assert lines["router"] == "Sunny in Oslo"
    assert lines["sub-agent"] == "Sunny in Kyoto {'city': 'Kyoto', 'sky': 'sunny'}"
    assert lines["tool"] == "Sunny in Rome"
    assert lines["OnHandOff"] == 'Weather {"reason": "a weather question"}'
    assert lines["host -> specialist"] == "Sunny in Oslo"
