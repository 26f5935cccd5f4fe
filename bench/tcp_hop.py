"""One process in the middle and nothing else: a TCP relay on uvloop that passes each
connection's bytes to an upstream and back, as they come, reading none of them.

    python -m bench.tcp_hop --port 8003 --upstream 127.0.0.1:8080

What any service between a client and a model server costs before it does any work of its
own: two more loopback hops and a process woken for each, on the same machine as the model.
bench/real_model.py reads the model server through it as the path `hop`, the floor under what
our /assist and /v1 add (they parse HTTP, run an agent and make a request of their own, where
this copies bytes).
"""

from __future__ import annotations

import argparse
import asyncio
from typing import cast

import uvloop

from bench.servers import HOST


class _Pipe(asyncio.Protocol):
    """One side of a relayed connection: what it receives is written to its peer's transport."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.peer: _Pipe | None = None
        self._early: list[bytes] = []  # what came before the peer's connection was open

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is one, not a subclass of it

    def data_received(self, data: bytes) -> None:
        peer = self.peer
        if peer is not None and peer.transport is not None:
            peer.transport.write(data)
        else:
            self._early.append(data)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.close()

    def joined(self, peer: _Pipe) -> None:
        self.peer = peer
        assert peer.transport is not None
        for data in self._early:
            peer.transport.write(data)
        self._early.clear()


async def serve(port: int, upstream_host: str, upstream_port: int) -> None:
    loop = asyncio.get_running_loop()
    connecting: set[asyncio.Task[None]] = set()  # the loop keeps only a weak reference to a task

    def accepted() -> _Pipe:
        client = _Pipe()

        async def connect() -> None:
            try:
                _, model = await loop.create_connection(_Pipe, upstream_host, upstream_port)
            except OSError:
                if client.transport is not None:
                    client.transport.close()
                return
            if client.transport is None or client.transport.is_closing():  # the client left meanwhile
                assert model.transport is not None
                model.transport.close()
                return
            model.joined(client)
            client.joined(model)

        task = loop.create_task(connect())
        connecting.add(task)
        task.add_done_callback(connecting.discard)
        return client

    server = await loop.create_server(accepted, HOST, port)
    async with server:
        await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.tcp_hop", description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--upstream", required=True, help="host:port")
    args = parser.parse_args()
    host, _, port = args.upstream.rpartition(":")
    uvloop.run(serve(args.port, host, int(port)))


if __name__ == "__main__":
    main()
