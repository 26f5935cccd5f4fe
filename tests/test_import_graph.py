"""The package imports the way docs/architecture.md's rooms table says it does (the design's
"Imports point one way: protocol <- runtime <- everything else"): the table is read here, so the
page and this test cannot disagree.

What counts as an import: every `import` and `from ... import` statement of a module, wherever it
stands: at the top, inside a function or method (a deferred import is an arrow all the same, taken
later), under `if TYPE_CHECKING:` (a type taken from a room is a dependency on that room, even if
only the type checker follows it), in a `try`. `from package import name` is an import of the
module `package.name` when there is one, else of `package`. What a module loads by a string (the
lazy exports' homes, `importlib.import_module`, uvicorn's "module:attr" factory) is not a
statement, and is not counted; the front door's TYPE_CHECKING imports name the same homes.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ARCHITECTURE = ROOT / "docs" / "architecture.md"
PACKAGE = "sentient_assist/"
# The folders whose modules belong to rooms: the package, and this repository's service (a row of
# its own). ./agents is held to the public submodules by tests/test_front_door.py.
PACKAGES = ("sentient_assist", "app")
EVERY_ROOM = "every room may import"  # the words in a row's imports that make it every room's
ROOM_PATH = re.compile(r"`([\w./]+(?:/|\.py))`")  # a room's path in the table; other `code` is prose
EXCEPTION_LINE = re.compile(r"^- `(?P<source>[^`]+)` imports `(?P<target>[^`]+)`", flags=re.MULTILINE)


@dataclass(frozen=True)
class Room:
    paths: tuple[str, ...]  # as the table's first column names them, relative to the repository
    imports: tuple[str, ...]  # the paths of the rooms its row names
    for_every_room: bool

    @property
    def name(self) -> str:
        return self.paths[0]


@dataclass(frozen=True)
class Arrow:
    source: str  # the importing module's file, relative to the repository
    line: int
    statement: str  # the module imported, as written
    target: str  # the imported module's file


def section(title: str) -> str:
    text = ARCHITECTURE.read_text()
    start = text.index(f"## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else None]


@cache
def rooms() -> tuple[Room, ...]:
    found = []
    for line in section("Rooms").splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")] if line.startswith("|") else []
        if len(cells) != 3 or cells[0] in ("room", "") or set(cells[0]) <= {"-"}:
            continue
        paths = tuple(ROOM_PATH.findall(cells[0]))
        imports = tuple(PACKAGE + path for path in ROOM_PATH.findall(cells[2]))
        found.append(Room(paths, imports, EVERY_ROOM in cells[2]))
    return tuple(found)


def exceptions() -> list[tuple[str, str]]:
    return [(m["source"], m["target"]) for m in EXCEPTION_LINE.finditer(section("Rooms"))]


def room_paths() -> dict[str, Room]:
    return {path: room for room in rooms() for path in room.paths}


def within(path: str, room_path: str) -> bool:
    return path == room_path or (room_path.endswith("/") and path.startswith(room_path))


def room_of(path: str) -> Room | None:
    """The most specific row naming the file `path`."""
    matches = [p for p in room_paths() if within(path, p)]
    return room_paths()[max(matches, key=len)] if matches else None


def module_file(dotted: str) -> str | None:
    """The file of the module `dotted`, if it is one of ours."""
    base = ROOT.joinpath(*dotted.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate.relative_to(ROOT).as_posix()
    return None


def modules() -> list[Path]:
    return sorted(path for package in PACKAGES for path in (ROOT / package).rglob("*.py"))


def dotted_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def arrows() -> tuple[Arrow, ...]:
    found = []
    for path in modules():
        source = path.relative_to(ROOT).as_posix()
        here = dotted_name(path).split(".")
        package = here if path.name == "__init__.py" else here[:-1]
        for node in ast.walk(ast.parse(path.read_text(), source)):
            if isinstance(node, ast.Import):
                imported = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: from the package, up level - 1
                    base = ".".join([*package[: len(package) - node.level + 1], *([base] if base else [])])
                # `from package import module` imports the module; `from module import name`, the module.
                imported = [
                    f"{base}.{alias.name}" if module_file(f"{base}.{alias.name}") else base for alias in node.names
                ]
            else:
                continue
            for name in dict.fromkeys(imported):
                if name.split(".")[0] not in PACKAGES:
                    continue  # the standard library's and third parties'
                target = module_file(name)
                assert target is not None, f"{source}:{node.lineno} imports {name}, which is no module of ours"
                found.append(Arrow(source, node.lineno, name, target))
    return tuple(found)


def reachable(room: Room) -> set[str]:
    """The rooms `room` may import: those its row names, and theirs in turn (itself among them
    only if the arrows go round)."""
    by_name = room_paths()
    seen: set[str] = set()
    todo = list(room.imports)
    while todo:
        name = todo.pop()
        if name not in seen and name in by_name:
            seen.add(by_name[name].name)
            todo.extend(by_name[name].imports)
    return seen


def excused(arrow: Arrow) -> bool:
    return any(within(arrow.source, source) and within(arrow.target, target) for source, target in exceptions())


def test_the_table_names_rooms_and_every_module_has_one():
    assert len(rooms()) >= 10, "docs/architecture.md: no rooms table under ## Rooms"
    missing = [path for path in room_paths() if not (ROOT / path).exists()]
    assert not missing, f"docs/architecture.md's rooms table names what does not exist: {missing}"
    unknown = sorted({i for room in rooms() for i in room.imports if i not in room_paths()})
    assert not unknown, f"docs/architecture.md's rooms table imports rooms it has no row for: {unknown}"
    homeless = [p.relative_to(ROOT).as_posix() for p in modules() if room_of(p.relative_to(ROOT).as_posix()) is None]
    assert not homeless, f"modules of no room in docs/architecture.md's rooms table: {homeless}"


def test_the_rooms_arrows_point_one_way():
    going_round = [room.name for room in rooms() if room.name in reachable(room)]
    assert not going_round, f"docs/architecture.md: these rooms import themselves through others: {going_round}"
    protocol, runtime = room_of(PACKAGE + "protocol/events.py"), room_of(PACKAGE + "runtime/run.py")
    assert protocol is not None and runtime is not None
    assert reachable(protocol) <= {r.name for r in rooms() if r.for_every_room}, "protocol/ is the floor"
    assert reachable(runtime) - reachable(protocol) == {protocol.name}, "runtime/ imports only protocol/"
    for room in rooms():
        if room not in (protocol, runtime) and not room.for_every_room:
            assert runtime.name in reachable(room) | {room.name}, f"{room.name} is not above runtime/"


def test_every_import_is_an_arrow_the_rooms_table_allows():
    forbidden = []
    for arrow in arrows():
        source, target = room_of(arrow.source), room_of(arrow.target)
        assert source is not None and target is not None
        if source == target or target.for_every_room or target.name in reachable(source) or excused(arrow):
            continue
        forbidden.append(
            f"{arrow.source}:{arrow.line} imports {arrow.statement}: "
            f"{source.name} may not import {target.name} (docs/architecture.md, Rooms)"
        )
    assert not forbidden, "\n".join(forbidden)


def test_every_arrow_the_table_draws_is_an_import_of_today():
    drawn = {(room.name, name) for room in rooms() for name in room.imports}
    imported = set()
    for arrow in arrows():
        source, target = room_of(arrow.source), room_of(arrow.target)
        assert source is not None and target is not None
        imported.add((source.name, target.name))
    stale = sorted(f"{source} imports {target}" for source, target in drawn - imported)
    assert not stale, "docs/architecture.md's rooms table draws arrows no module takes:\n" + "\n".join(stale)


def test_every_arrow_allowed_against_the_rooms_is_still_there():
    listed = exceptions()
    assert listed, "docs/architecture.md: the list of arrows against the rooms is gone; if none is left, drop this test"
    gone = [
        f"{source} imports {target}"
        for source, target in listed
        if not any(within(a.source, source) and within(a.target, target) for a in arrows())
    ]
    assert not gone, "docs/architecture.md lists arrows against the rooms that no module takes any more: " + str(gone)
