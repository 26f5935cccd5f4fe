"""Servers shared by the test packages: started once per session, on loopback."""

import logging
from collections.abc import Iterator

import pytest

from tests.support.openai_server import FakeOpenAI
from tests.support.server import RunningServer, Servers

SCRIPTED_TIMEOUT = 3.0
SCRIPTED_PING = 0.5


@pytest.fixture(scope="session")
def serve() -> Iterator[Servers]:
    """`serve(env, args)`: the service (`python -m app serve`) with exactly these settings and
    flags, started at first use and shared by every test that asks for the same, till the session
    ends. A test that stops, signals or breaks its server starts its own with `running_server`."""
    servers = Servers()
    try:
        yield servers
    finally:
        servers.close()


SCRIPTED = {
    "ASSIST_AGENT": "tests.support.agents:ScriptedAgent",
    "ASSIST_REQUEST_TIMEOUT": str(SCRIPTED_TIMEOUT),
    "ASSIST_PING_INTERVAL": str(SCRIPTED_PING),
    "ASSIST_LOG_LEVEL": "warning",
}


@pytest.fixture(scope="session")
def scripted_server(serve: Servers) -> RunningServer:
    return serve(SCRIPTED)


@pytest.fixture(scope="session")
def showcase_server(serve: Servers) -> RunningServer:
    return serve()


@pytest.fixture(scope="module")
def model_server():
    """A fake OpenAI-compatible server on loopback, one per test module that asks for it."""
    with FakeOpenAI() as server:
        yield server


@pytest.fixture
def model(model_server):
    """The module's fake OpenAI server, emptied; every scripted reply must have been asked for."""
    model_server.reset()
    yield model_server
    assert model_server.pending == 0, "the test scripted replies nobody asked for"


class Records(logging.Handler):
    """Keeps the records it is given."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def llm_log() -> Iterator[list[logging.LogRecord]]:
    """The records of the app.llm logger, whatever logging was configured before."""
    handler = Records()
    logger = logging.getLogger("sentient_assist.llm")
    logger.addHandler(handler)
    try:
        yield handler.records
    finally:
        logger.removeHandler(handler)


# Tests whose subject is another program than Python (a browser, nginx, node's clients, a model
# server): `-m "not external"` leaves them out, as .ci/run does on its second Python, where
# they would test the same program again.
EXTERNAL = (
    "tests/browser/",
    "tests/server/test_nginx_proxy.py",
    "tests/llm/test_llama_server.py",
    "tests/server/test_agui_face.py::test_http_agent_",
    "tests/server/test_a2a_face.py::test_the_a2a_js_client",
    "tests/server/test_mcp_face.py::test_the_inspector_cli",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.nodeid.startswith(EXTERNAL):
            item.add_marker(pytest.mark.external)
