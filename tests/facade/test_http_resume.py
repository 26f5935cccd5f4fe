"""The HTTP Agent resumes a stream cut mid-answer (the service's resumable runs): its result is
the same as an uncut run's. The cuts are made by a TCP proxy on loopback in front of a real
uvicorn, which closes the first connections after some bytes of their answer."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from sentient_assist import Agent
from sentient_assist.exceptions import RemoteAgentError
from tests.facade.test_agent import without_ids
from tests.server.test_resumable_runs import resumable_env
from tests.support.server import RunningServer, free_port, running_server

pytestmark = pytest.mark.timeout(60)
PROMPT = "count:60:10"


class CuttingProxy:
    """Forwards loopback connections to `port`; the first `cuts` of them are closed once
    `after_bytes` of their answer went through (headers and some events: mid-answer)."""

    def __init__(self, port: int, cuts: int, after_bytes: int) -> None:
        self.port = port
        self.cuts_left = cuts
        self.after_bytes = after_bytes
        self.connections = 0
        self.cut = 0
        self.listen_port = free_port()
        self._server: asyncio.Server | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.listen_port}"

    async def __aenter__(self) -> CuttingProxy:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.listen_port)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._server is not None
        self._server.close()

    async def _serve(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        cut = self.cuts_left > 0
        self.cuts_left -= cut
        upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", self.port)

        async def forward_requests() -> None:
            while data := await client_reader.read(65536):
                upstream_writer.write(data)
                await upstream_writer.drain()

        requests = asyncio.ensure_future(forward_requests())
        sent = 0
        try:
            while data := await upstream_reader.read(512):
                if cut and sent + len(data) >= self.after_bytes:
                    client_writer.write(data[: self.after_bytes - sent])
                    await client_writer.drain()
                    self.cut += 1
                    client_writer.transport.abort()  # as a dropped network would: no end of the body
                    return
                client_writer.write(data)
                await client_writer.drain()
                sent += len(data)
        except ConnectionError:
            pass
        finally:
            requests.cancel()
            upstream_writer.close()
            client_writer.close()


@pytest.fixture(scope="module")
def server() -> Iterator[RunningServer]:
    with running_server(resumable_env()) as running:
        yield running


async def test_a_cut_stream_is_resumed_and_the_result_is_an_uncut_runs(server):
    uncut = await Agent(server.url + "/assist", processor_id="resume-test").run(PROMPT)
    async with CuttingProxy(int(server.url.rsplit(":", 1)[1]), cuts=2, after_bytes=3000) as proxy:
        resumed = await Agent(proxy.url + "/assist", processor_id="resume-test").run(PROMPT)
    assert proxy.cut == 2 and proxy.connections == 3, "cut twice mid-answer, resumed twice"
    assert resumed.text == uncut.text == "".join(f"t{index} " for index in range(60))
    assert without_ids(resumed) == without_ids(uncut)
    ids = [event["id"] for event in resumed.messages[-1].events]
    assert ids == sorted(set(ids)), "each event once, in order"


async def test_a_cut_stream_of_a_service_that_does_not_keep_runs_is_an_error_as_before():
    with running_server(resumable_env(detach_grace="0")) as plain:
        async with CuttingProxy(int(plain.url.rsplit(":", 1)[1]), cuts=1, after_bytes=3000) as proxy:
            with pytest.raises(RemoteAgentError) as raised:
                await Agent(proxy.url + "/assist").run(PROMPT)
    assert proxy.connections == 1
    assert "RemoteProtocolError" in str(raised.value) or "before done" in str(raised.value)
