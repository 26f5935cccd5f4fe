"""Servers shared by the test packages: started once per session, on loopback."""

import pytest

from tests.support.server import running_server

SCRIPTED_TIMEOUT = 3.0
SCRIPTED_PING = 0.5


@pytest.fixture(scope="session")
def scripted_server():
    env = {
        "ASSIST_AGENT": "tests.support.agents:ScriptedAgent",
        "ASSIST_REQUEST_TIMEOUT": str(SCRIPTED_TIMEOUT),
        "ASSIST_PING_INTERVAL": str(SCRIPTED_PING),
        "ASSIST_LOG_LEVEL": "warning",
    }
    with running_server(env) as server:
        yield server


@pytest.fixture(scope="session")
def showcase_server():
    with running_server() as server:
        yield server
