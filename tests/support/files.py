"""Files the test agents write where a test can see them (a marker that the agent was
cancelled, say), waited for."""

from __future__ import annotations

import time
from pathlib import Path


def wait_for_file(path: Path, timeout: float) -> str | None:
    """The text of `path` once it exists and is not empty; None after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text():
            return path.read_text()
        time.sleep(0.01)
    return None
