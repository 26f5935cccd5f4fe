"""The registry: agents in the agents/ package, and module:attr paths."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

import pytest

from app import AbstractAgent, AgentNotFoundError, registry
from app.registry import available_agents, load_agent

FIXTURES = "tests.registry_fixtures"

AGENT_CLASS_SOURCE = """
from app import AbstractAgent


class {name}(AbstractAgent):
    async def assist(self, session, query, response_handler):
        pass
"""


def agent_class(name: str) -> str:
    return AGENT_CLASS_SOURCE.format(name=name)


def not_found(spec: str) -> str:
    """The message of the AgentNotFoundError that loading `spec` raises."""
    with pytest.raises(AgentNotFoundError) as exc:
        load_agent(spec)
    return str(exc.value)


@pytest.fixture
def agents_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A fresh agents-like package on sys.path, made the registry's package; returns a module writer."""
    package = f"agents_{uuid.uuid4().hex}"
    (tmp_path / package).mkdir()
    (tmp_path / package / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(registry, "AGENTS_PACKAGE", package)

    def write(module: str, source: str) -> None:
        (tmp_path / package / f"{module}.py").write_text(source)

    yield write
    for name in [name for name in sys.modules if name == package or name.startswith(package + ".")]:
        del sys.modules[name]


# --- the agents/ package ------------------------------------------------------------


def test_available_agents_lists_showcase():
    assert "showcase" in available_agents()


def test_load_agent_builds_showcase():
    agent = load_agent("showcase")
    assert isinstance(agent, AbstractAgent)
    assert agent.name == "showcase"


def test_load_agent_ignores_surrounding_whitespace():
    assert load_agent("  showcase\n").name == "showcase"


def test_unknown_agent_names_it_and_the_agents_there_are():
    message = not_found("nope")
    assert "nope" in message
    assert "showcase" in message


# --- module:attr paths --------------------------------------------------------------


@pytest.mark.parametrize(
    "attr, name",
    [("ClassAgent", "class-agent"), ("instance", "instance-agent"), ("factory", "factory-agent")],
    ids=["class", "instance", "factory"],
)
def test_module_attr_builds_the_agent(attr, name):
    agent = load_agent(f"{FIXTURES}:{attr}")
    assert isinstance(agent, AbstractAgent)
    assert agent.name == name


def test_module_attr_instance_is_the_same_object():
    from tests import registry_fixtures

    assert load_agent(f"{FIXTURES}:instance") is registry_fixtures.instance


def test_module_attr_works_for_an_agents_module():
    assert load_agent("agents.showcase:ShowcaseAgent").name == "showcase"


@pytest.mark.parametrize(
    "spec, fragments",
    [
        ("tests.no_such_module:agent", ["tests.no_such_module", "ModuleNotFoundError"]),
        (f"{FIXTURES}:missing", ["missing", "no attribute"]),
        (f"{FIXTURES}:not_an_agent", ["not_an_agent", "str", "not an AbstractAgent"]),
        (f"{FIXTURES}:failing_factory", ["failing_factory", "RuntimeError", "no model key configured"]),
        (f"{FIXTURES}:non_agent_factory", ["non_agent_factory", "dict", "not an AbstractAgent"]),
    ],
    ids=["missing-module", "missing-attribute", "not-an-agent", "factory-raises", "factory-returns-non-agent"],
)
def test_module_attr_failures_say_what_went_wrong(spec, fragments):
    message = not_found(spec)
    for fragment in fragments:
        assert fragment in message


# --- discovery in an agents package -----------------------------------------------------


def test_module_with_one_agent_subclass_is_found(agents_package):
    agents_package("solo", agent_class("SoloAgent"))
    assert available_agents() == ["solo"]
    agent = load_agent("solo")
    assert type(agent).__name__ == "SoloAgent"
    assert agent.name == "SoloAgent"


def test_module_attribute_agent_wins_over_subclasses(agents_package):
    agents_package("chosen", agent_class("First") + agent_class("Second") + "\nagent = Second('picked')\n")
    assert load_agent("chosen").name == "picked"


def test_imported_agent_classes_are_not_candidates(agents_package):
    agents_package("importer", "from tests.registry_fixtures import ClassAgent\n" + agent_class("Own"))
    assert type(load_agent("importer")).__name__ == "Own"


def test_private_modules_are_not_listed(agents_package):
    agents_package("visible", agent_class("Visible"))
    agents_package("_helpers", "")
    assert available_agents() == ["visible"]


def test_module_with_two_subclasses_names_both(agents_package):
    agents_package("pair", agent_class("AlphaAgent") + agent_class("BetaAgent"))
    message = not_found("pair")
    assert "AlphaAgent" in message
    assert "BetaAgent" in message


def test_module_without_an_agent_says_so(agents_package):
    agents_package("empty", "VALUE = 1\n")
    assert "defines no AbstractAgent subclasses" in not_found("empty")


def test_module_whose_import_raises_names_the_exception(agents_package):
    agents_package("broken", "raise ValueError('bad configuration')\n")
    message = not_found("broken")
    assert "ValueError" in message
    assert "bad configuration" in message
