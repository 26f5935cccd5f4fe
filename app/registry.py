"""Finds agents: a module in the `agents` package (one file, one agent) or a `module:attr` path."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from types import ModuleType
from typing import Any

from app.runtime.agent import AbstractAgent
from app.runtime.errors import AgentNotFoundError, SettingsError

AGENTS_PACKAGE = "agents"


def available_agents() -> list[str]:
    """Names of the agent modules in the `agents` package, without importing them."""
    try:
        package = importlib.import_module(AGENTS_PACKAGE)
    except ModuleNotFoundError as exc:
        if exc.name != AGENTS_PACKAGE:
            raise AgentNotFoundError(f"importing {AGENTS_PACKAGE!r} failed: {exc}") from exc
        return []
    except Exception as exc:
        raise AgentNotFoundError(f"importing {AGENTS_PACKAGE!r} failed: {type(exc).__name__}: {exc}") from exc
    return sorted(info.name for info in pkgutil.iter_modules(package.__path__) if not info.name.startswith("_"))


def load_agent(spec: str) -> AbstractAgent:
    """Build the agent `spec` names: `showcase` (agents/showcase.py) or `package.module:attr`."""
    spec = spec.strip()
    if ":" in spec:
        module_name, _, attr = spec.partition(":")
        module = _import(module_name, spec)
        try:
            target = getattr(module, attr)
        except AttributeError:
            raise AgentNotFoundError(f"agent {spec!r}: module {module_name!r} has no attribute {attr!r}") from None
        return _build(target, spec)
    names = available_agents()
    if spec not in names:
        found = ", ".join(names) if names else "none"
        raise AgentNotFoundError(
            f"no agent named {spec!r}. Agents found in {AGENTS_PACKAGE}/: {found}. "
            "Set ASSIST_AGENT to one of them, or to a module:attr path."
        )
    module = _import(f"{AGENTS_PACKAGE}.{spec}", spec)
    agent = _build(_agent_of_module(module, spec), spec)
    return agent


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
