"""`sentient_assist.exceptions`: every public exception of the package is there, its docstring
draws the hierarchy as the classes have it, and each face's input error is one type."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re

import sentient_assist
import sentient_assist.exceptions as exceptions
from sentient_assist.exceptions import (
    AgentRunError,
    InputError,
    ModelProviderError,
    PauseRefused,
    ProcessorError,
    UsageLimitExceeded,
)


def _defined_exceptions() -> dict[str, type[BaseException]]:
    """Every exception class a module of the package defines under a public name, wherever it is."""
    found: dict[str, type[BaseException]] = {}
    for info in pkgutil.walk_packages(sentient_assist.__path__, "sentient_assist."):
        if info.name.rsplit(".", 1)[-1] == "__main__":
            continue  # runs the CLI
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if (
                inspect.isclass(value)
                and issubclass(value, BaseException)
                and value.__module__ == module.__name__
                and not name.startswith("_")
            ):
                found[f"{module.__name__}.{name}"] = value
    return found


def test_every_public_exception_of_the_package_is_in_the_exceptions_module():
    defined = _defined_exceptions()
    assert defined, "the walk found no exception at all"
    exported = {getattr(exceptions, name) for name in exceptions.__all__}
    missing = sorted(where for where, cls in defined.items() if cls not in exported)
    assert missing == [], f"exceptions not in sentient_assist.exceptions.__all__: {missing}"
    assert exported <= set(defined.values())
    for cls in exported:
        assert issubclass(cls, ProcessorError), cls


def test_the_docstring_tree_is_the_hierarchy():
    """Each line of the tree names a class and, by its indent, its parent: as the classes have it."""
    assert exceptions.__doc__ is not None
    parents: dict[str, str | None] = {}
    stack: list[str] = []
    for line in exceptions.__doc__.splitlines():
        drawn = re.match(r"^((?:│   |    )*)(?:├── |└── )?([A-Z]\w+)\s{2,}", line)
        if drawn is None:
            continue
        depth = len(drawn[1]) // 4 + (1 if line[len(drawn[1]) :].startswith(("├", "└")) else 0)
        del stack[depth:]
        parents[drawn[2]] = stack[-1] if stack else None
        stack.append(drawn[2])
    assert sorted(parents) == sorted(exceptions.__all__)
    for name, parent in parents.items():
        cls = getattr(exceptions, name)
        if parent is None:
            assert cls is ProcessorError
        else:
            assert getattr(exceptions, parent) in cls.__bases__, f"{name} is drawn under {parent}"


def test_a_usage_limit_is_a_run_stopped_not_a_provider_failure():
    limit = UsageLimitExceeded("Stopped: the model was still calling tools after 3 turns.", "max_turns")
    assert isinstance(limit, AgentRunError) and not isinstance(limit, ModelProviderError)
    assert (limit.message, limit.error_code, limit.details) == (str(limit), 400, {"limit": "max_turns"})
    provider = ModelProviderError("The model provider failed while answering.")
    assert isinstance(provider, AgentRunError) and provider.error_code == 502


def test_an_input_error_names_its_field_in_its_message():
    error = InputError("messages[2].content", "at most 64 parts", status=404, code="model_not_found")
    assert str(error) == error.message == "messages[2].content: at most 64 parts"
    assert (error.field, error.reason, error.status, error.code) == (
        "messages[2].content",
        "at most 64 parts",
        404,
        "model_not_found",
    )
    assert isinstance(error, ValueError)
    refused = PauseRefused("The pause has expired: ask again.", status=409)
    assert isinstance(refused, InputError) and refused.field is None
    assert str(refused) == "The pause has expired: ask again." and refused.status == 409
