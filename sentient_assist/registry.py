"""Finds agents: a file in the agents directory (one file, one agent), an agent an installed
package registers under the entry-point group `sentient_assist.agents`, or a `module:attr` path.

The agents directory is `./agents` of the working directory, or the one ASSIST_AGENTS_DIR
names. Its files are imported as modules of a package of the registry's own,
`assist_agents`, never as `agents`: the OpenAI Agents SDK's top-level package has that
name, and a folder of files must not hide it from the agents that use it. Files of the
directory import each other relatively (`from .assistant import calculate`).
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.metadata
import importlib.util
import inspect
import pkgutil
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from sentient_assist.runtime.agent import AbstractAgent
from sentient_assist.runtime.errors import AgentNotFoundError, SettingsError
from sentient_assist.server.settings import load_settings

__all__ = ["ENTRY_POINT_GROUP", "available_agents", "load_agent"]

DEFAULT_AGENTS_DIR = Path("agents")
ENTRY_POINT_GROUP = "sentient_assist.agents"
# The package the directory's files are imported into.
AGENTS_MODULE = "assist_agents"


def available_agents(directory: str | Path | None = None) -> list[str]:
    """Names of the agents in `directory` (default: ASSIST_AGENTS_DIR, else ./agents) and of
    the installed packages' entry points, without importing any of them."""
    return sorted(set(_directory_agents(_resolve(directory))) | set(_entry_points()))


def load_agent(spec: str, directory: str | Path | None = None) -> AbstractAgent:
    """Build the agent `spec` names: a file of the agents directory (`weather` is
    ./agents/weather.py), an installed package's entry point (the built-in `showcase` is
    one), or `package.module:attr`. A file of the directory wins over an entry point of the
    same name."""
    spec = spec.strip()
    if ":" in spec:
        module_name, _, attr = spec.partition(":")
        module = _import(module_name, spec)
        try:
            target = getattr(module, attr)
        except AttributeError:
            raise AgentNotFoundError(f"agent {spec!r}: module {module_name!r} has no attribute {attr!r}") from None
        return _build(target, spec)
    folder = _resolve(directory)
    if spec in _directory_agents(folder):
        module = _import(f"{_package(folder).__name__}.{spec}", spec)
        return _build(_agent_of_module(module, spec), spec)
    entry_points = _entry_points()
    if spec in entry_points:
        try:
            target = entry_points[spec].load()
        except Exception as exc:
            raise AgentNotFoundError(
                f"agent {spec!r}: loading the entry point {entry_points[spec].value!r} failed: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        return _build(target, spec)
    names = available_agents(folder)
    found = ", ".join(names) if names else "none"
    where = f"{folder}/" if folder.is_dir() else f"{folder}/ (no such directory; ASSIST_AGENTS_DIR names another)"
    raise AgentNotFoundError(
        f"no agent named {spec!r}. Agents found in {where} and installed packages: {found}. "
        "Set ASSIST_AGENT to one of them, or to a module:attr path."
    )


def _resolve(directory: str | Path | None) -> Path:
    # Absolute, as the working directory is when asked: importers are cached by path string.
    return (Path(directory) if directory is not None else load_settings().agents_dir).resolve()


def _directory_agents(folder: Path) -> list[str]:
    if not folder.is_dir():
        return []
    return [info.name for info in pkgutil.iter_modules([str(folder)]) if not info.name.startswith("_")]


def _entry_points() -> dict[str, importlib.metadata.EntryPoint]:
    return {entry.name: entry for entry in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)}


def _package(folder: Path) -> ModuleType:
    """The package whose modules are `folder`'s files; made anew when the folder changes."""
    location = str(folder)
    package = sys.modules.get(AGENTS_MODULE)
    if package is not None and list(getattr(package, "__path__", ())) == [location]:
        return package
    for name in [name for name in sys.modules if name.startswith(AGENTS_MODULE + ".")]:
        del sys.modules[name]  # another folder's modules, under the same names
    spec = importlib.machinery.ModuleSpec(AGENTS_MODULE, None, is_package=True)
    spec.submodule_search_locations = [location]
    package = importlib.util.module_from_spec(spec)
    sys.modules[AGENTS_MODULE] = package
    return package


def _import(module_name: str, spec: str) -> ModuleType:
    try:
        return importlib.import_module(module_name)
    except Exception as exc:
        raise AgentNotFoundError(
            f"agent {spec!r}: importing {module_name!r} failed: {type(exc).__name__}: {exc}"
        ) from exc


def _agent_of_module(module: ModuleType, spec: str) -> Any:
    """A module's `agent` attribute, else the one concrete AbstractAgent subclass it defines."""
    if hasattr(module, "agent"):
        return module.agent
    classes = [
        obj
        for obj in vars(module).values()
        if inspect.isclass(obj)
        and issubclass(obj, AbstractAgent)
        and obj.__module__ == module.__name__
        and not inspect.isabstract(obj)
    ]
    if len(classes) != 1:
        what = "no" if not classes else f"{len(classes)} ({', '.join(c.__name__ for c in classes)})"
        raise AgentNotFoundError(
            f"agent {spec!r}: {module.__name__} defines {what} AbstractAgent subclasses; "
            "define exactly one, or name the agent in a module attribute `agent`"
        )
    return classes[0]


def _build(target: Any, spec: str) -> AbstractAgent:
    if isinstance(target, AbstractAgent):
        return target
    if inspect.isclass(target) and not issubclass(target, AbstractAgent):
        raise AgentNotFoundError(f"agent {spec!r} is the class {target.__name__}, not an AbstractAgent subclass")
    if callable(target):
        try:
            agent = target()
        except SettingsError:
            raise  # it names the missing setting and how to set it
        except Exception as exc:
            raise AgentNotFoundError(f"agent {spec!r}: building it failed: {type(exc).__name__}: {exc}") from exc
        if isinstance(agent, AbstractAgent):
            return agent
        raise AgentNotFoundError(f"agent {spec!r}: its factory returned {type(agent).__name__}, not an AbstractAgent")
    raise AgentNotFoundError(f"agent {spec!r} is a {type(target).__name__}, not an AbstractAgent, class or factory")
