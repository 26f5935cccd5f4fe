"""The repository's own account of itself cites only files that exist."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Files the README asks its reader to write.
EXAMPLES = {"agents/weather.py"}
CITED = re.compile(r"\b((?:app|docs|bench|tests|agents)/[\w./-]*\w\.(?:py|md))\b")


def test_docs_and_code_cite_files_that_exist():
    sources = [*ROOT.glob("docs/*.md"), ROOT / "README.md", ROOT / "bench" / "README.md", *ROOT.glob("app/**/*.py")]
    missing = []
    for source in sources:
        for cited in CITED.findall(source.read_text()):
            if cited not in EXAMPLES and not (ROOT / cited).exists():
                missing.append(f"{source.relative_to(ROOT)} cites {cited}")
    assert not missing, "\n".join(missing)


def test_the_protocol_and_the_architecture_are_documented():
    for name in ("protocol.md", "architecture.md"):
        assert (ROOT / "docs" / name).stat().st_size > 1000, name
