"""The registry: agents in the agents directory, the package's built-in agents and installed
packages' entry points, and module:attr paths."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from sentient_assist import AbstractAgent, registry
from sentient_assist.exceptions import AgentNotFoundError
from sentient_assist.registry import available_agents, load_agent

FIXTURES = "tests.registry_fixtures"
# The package's own agents, registered as entry points (pyproject.toml): always available.
BUILT_IN = {"assistant", "chat", "concierge", "echo", "showcase", "trip"}


def found_besides_the_built_in() -> list[str]:
    return [name for name in available_agents() if name not in BUILT_IN]


AGENT_CLASS_SOURCE = """
from sentient_assist import AbstractAgent


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
    """A fresh agents directory, named by ASSIST_AGENTS_DIR; returns a file writer."""
    folder = tmp_path / "my-agents"
    folder.mkdir()
    monkeypatch.setenv("ASSIST_AGENTS_DIR", str(folder))

    def write(module: str, source: str) -> None:
        (folder / f"{module}.py").write_text(source)

    yield write
    for name in [name for name in sys.modules if name.startswith(registry.AGENTS_MODULE)]:
        del sys.modules[name]


# --- the agents/ package ------------------------------------------------------------


def test_available_agents_lists_the_built_in_agents_in_any_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ASSIST_AGENTS_DIR", raising=False)
    assert set(available_agents()) == BUILT_IN
    assert load_agent("showcase").name == "showcase"


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
    ("attr", "name"),
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


def test_module_attr_works_for_a_built_in_agents_module():
    assert load_agent("sentient_assist.agents.showcase:ShowcaseAgent").name == "showcase"


@pytest.mark.parametrize(
    ("spec", "fragments"),
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
    assert found_besides_the_built_in() == ["solo"]
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
    assert found_besides_the_built_in() == ["visible"]


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


def test_files_of_the_directory_import_each_other_relatively(agents_package):
    agents_package("_shared", "GREETING = 'hello from a sibling'\n")
    agents_package("user", "from ._shared import GREETING\n" + agent_class("User") + "\nagent = User(GREETING)\n")
    assert load_agent("user").name == "hello from a sibling"


def test_the_directory_is_not_imported_as_agents(agents_package):
    """A top-level `agents` (the OpenAI Agents SDK's package name) stays free for agents to use."""
    agents_package("solo", agent_class("SoloAgent"))
    agent = load_agent("solo")
    assert type(agent).__module__ == f"{registry.AGENTS_MODULE}.solo"
    assert not type(agent).__module__.startswith("agents.")


def test_the_default_directory_is_agents_of_the_working_directory(tmp_path, monkeypatch):
    (tmp_path / "agents").mkdir()
    (tmp_path / "agents" / "here.py").write_text(agent_class("Here"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ASSIST_AGENTS_DIR", raising=False)
    try:
        assert found_besides_the_built_in() == ["here"]
        assert type(load_agent("here")).__name__ == "Here"
    finally:
        for name in [name for name in sys.modules if name.startswith(registry.AGENTS_MODULE)]:
            del sys.modules[name]


def test_a_missing_directory_is_named_in_the_error(tmp_path, monkeypatch):
    monkeypatch.setenv("ASSIST_AGENTS_DIR", str(tmp_path / "nowhere"))
    message = not_found("no_such_agent")
    assert "nowhere" in message
    assert "no such directory" in message
    assert found_besides_the_built_in() == []


# --- installed packages' entry points -------------------------------------------------


def install_entry_points(site: Path, entries: dict[str, str], module_source: str = "") -> None:
    """A distribution in `site` (on sys.path) with `sentient_assist.agents` entry points, as
    pip would leave it: a dist-info folder with entry_points.txt."""
    dist_info = site / "plugin_agents-1.0.dist-info"
    dist_info.mkdir(parents=True)
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: plugin-agents\nVersion: 1.0\n")
    lines = "".join(f"{name} = {value}\n" for name, value in entries.items())
    (dist_info / "entry_points.txt").write_text(f"[{registry.ENTRY_POINT_GROUP}]\n{lines}")
    (site / "plugin_agents.py").write_text(module_source)


PLUGIN_SOURCE = agent_class("Weather") + agent_class("Clash") + "\nweather = Weather('from a package')\n"


@pytest.fixture
def plugin_site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    site = tmp_path / "site"
    monkeypatch.syspath_prepend(str(site))
    yield site
    sys.modules.pop("plugin_agents", None)


def test_an_installed_package_registers_agents_by_entry_point(plugin_site, agents_package):
    install_entry_points(plugin_site, {"weather": "plugin_agents:weather"}, PLUGIN_SOURCE)
    agents_package("local", agent_class("Local"))
    assert found_besides_the_built_in() == ["local", "weather"]
    assert load_agent("weather").name == "from a package"


def test_a_file_of_the_directory_wins_over_an_entry_point_of_its_name(plugin_site, agents_package):
    install_entry_points(plugin_site, {"clash": "plugin_agents:Clash"}, PLUGIN_SOURCE)
    agents_package("clash", agent_class("LocalClash"))
    assert found_besides_the_built_in() == ["clash"]
    assert type(load_agent("clash")).__name__ == "LocalClash"


def test_an_entry_point_that_fails_to_load_is_named(plugin_site, agents_package):
    install_entry_points(plugin_site, {"broken": "plugin_agents:missing"}, PLUGIN_SOURCE)
    message = not_found("broken")
    assert "plugin_agents:missing" in message
    assert "AttributeError" in message
