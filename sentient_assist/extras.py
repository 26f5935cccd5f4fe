"""Whether an optional extra's package is installed, found without importing it: the service
starts, and an app or an agent builds, without the extras it does not use, and one that is
missing is named with the command that installs it."""

from __future__ import annotations

import importlib.metadata
import importlib.util


def install_hint(extra: str) -> str:
    return f"pip install 'sentient-assist[{extra}]'"


def found(module: str) -> bool:
    """Whether `module` can be imported, without importing it."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def missing(
    module: str, *, needs: str, extra: str, distribution: str | None = None, major: int | None = None
) -> str | None:
    """Why `module` cannot be used here, or None when it can: absent ("it needs <needs>: <the
    extra's install command>"), or its `distribution` not of version `major`.x. A module of no
    known version (a checkout) is taken as it is."""
    if not found(module):
        return f"it needs {needs}: {install_hint(extra)}"
    if distribution is None or major is None:
        return None
    try:
        version = importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None
    if version.split(".")[0] != str(major):
        return f"it needs {distribution} {major}.x, not {version}: {install_hint(extra)}"
    return None
