"""The repository's own account of itself cites only files that exist, and stays short at the door."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import sentient_assist

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
# Files the docs ask their reader to write (tests/test_doc_examples.py writes them in a scratch folder).
EXAMPLES = {"agents/weather.py", "agents/shouter.py"}
CITED = re.compile(r"\b((?:sentient_assist|app|docs|bench|tests|agents|examples)/[\w./-]*\w\.(?:py|md))\b")
LINK = re.compile(r"\]\((?!https?://|mailto:)(?P<path>[^)#\s]*)(?:#(?P<anchor>[^)\s]+))?\)")
README_MAX_CHARS = 15_000  # "a README a newcomer reads in five minutes"


def test_docs_and_code_cite_files_that_exist():
    sources = [
        *DOCS,
        README,
        ROOT / "bench" / "README.md",
        *ROOT.glob("app/**/*.py"),
        *ROOT.glob("sentient_assist/**/*.py"),
    ]
    missing = []
    for source in sources:
        for cited in CITED.findall(source.read_text()):
            if cited not in EXAMPLES and not (ROOT / cited).exists():
                missing.append(f"{source.relative_to(ROOT)} cites {cited}")
    assert not missing, "\n".join(missing)


def anchors(page: Path) -> set[str]:
    """GitHub's anchors for a page's headings: lower case, punctuation dropped, spaces to hyphens."""
    headings = re.findall(r"^#+ (.+)$", page.read_text(), flags=re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-") for heading in headings}


def test_links_between_the_pages_lead_somewhere():
    broken = []
    for page in [README, *DOCS]:
        text = re.sub(r"```.*?```", "", page.read_text(), flags=re.DOTALL)  # code is not links
        for link in LINK.finditer(text):
            target = (page.parent / link["path"]).resolve() if link["path"] else page
            if not target.exists():
                broken.append(f"{page.relative_to(ROOT)}: {link[0]}")
            elif link["anchor"] and target.suffix == ".md" and link["anchor"] not in anchors(target):
                broken.append(f"{page.relative_to(ROOT)}: {link[0]} (no such heading)")
    assert not broken, "\n".join(broken)


def test_the_readme_is_short_and_links_every_page_of_docs():
    text = README.read_text()
    assert len(text) <= README_MAX_CHARS, f"README.md is {len(text)} characters"
    unlinked = [page.name for page in DOCS if f"](docs/{page.name})" not in text]
    assert not unlinked, f"README.md links none of {unlinked}"


def test_the_readme_test_command_is_what_ci_runs():
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    (install,) = [line for line in ci if line.startswith("python3 -m venv .venv")]
    assert ".venv/bin/pytest" in ci
    assert f"{install} && .venv/bin/pytest" in README.read_text().splitlines()


def test_the_readme_shows_add_routes_as_it_is():
    from sentient_assist.server import add_routes

    shown = []
    for parameter in inspect.signature(add_routes).parameters.values():
        if parameter.kind is parameter.KEYWORD_ONLY and "*" not in shown:
            shown.append("*")
        default = "" if parameter.default is parameter.empty else "=" + repr(parameter.default).replace("'", '"')
        shown.append(parameter.name + default)
    assert f"add_routes({', '.join(shown)})" in README.read_text().splitlines()


def test_the_protocol_and_the_architecture_are_documented():
    for name in ("protocol.md", "architecture.md"):
        assert (ROOT / "docs" / name).stat().st_size > 1000, name


def test_the_public_submodules_are_listed_as_the_package_lists_them():
    """Written once, in sentient_assist/__init__.py; its docstring and docs/layout.md's table follow it."""
    listed = list(sentient_assist._PUBLIC_SUBMODULES)
    in_docstring = re.findall(r"^- `(sentient_assist\.\w+)`", sentient_assist.__doc__ or "", flags=re.MULTILINE)
    assert in_docstring == listed, "sentient_assist/__init__.py: the docstring's list is not _PUBLIC_SUBMODULES"
    layout = (ROOT / "docs" / "layout.md").read_text()
    in_table = re.findall(r"^\| `(sentient_assist\.\w+)` \|", layout, flags=re.MULTILINE)
    assert in_table == listed, "docs/layout.md: the public submodules' table is not _PUBLIC_SUBMODULES"
