"""An open stream held by a test, and the server's resident memory: for tests of what open
streams hold (tests/server/test_history_bombs.py, test_face_input_memory.py)."""

from __future__ import annotations

import socket

from tests.support.server import RunningServer


def rss_mb(server: RunningServer) -> float:
    with open(f"/proc/{server.process.pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


class HeldStream:
    """A POST (/assist, or `path`) on its own connection, read up to its first event, then held open."""

    def __init__(
        self, server: RunningServer, body: bytes, path: str = "/assist", headers: dict[str, str] | None = None
    ) -> None:
        port = int(server.url.rsplit(":", 1)[1])
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=20)
        more = "".join(f"{name}: {value}\r\n" for name, value in (headers or {}).items())
        head = (
            f"POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n{more}"
            f"Content-Length: {len(body)}\r\n\r\n"
        )
        self.sock.sendall(head.encode() + body)
        self.received = b""
        while b"\r\n\r\n" not in self.received:
            self.received += self._read()
        self.status = int(self.received.split(b" ", 2)[1])

    def _read(self) -> bytes:
        data = self.sock.recv(65536)
        if not data:
            raise ConnectionError(f"closed early: {self.received[:300]!r}")
        return data

    def first_event(self) -> None:
        """Until the agent's first event has arrived: the history was taken, the agent runs."""
        while b"data:" not in self.received:
            self.received += self._read()

    def answer(self) -> bytes:
        """The rest of a refusal (it is sized): the JSON body."""
        head, _, rest = self.received.partition(b"\r\n\r\n")
        length = int(
            next(line for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")).split(b":")[1]
        )
        while len(rest) < length:
            rest += self._read()
        return rest[:length]

    def close(self) -> None:
        self.sock.close()


def rss_mb_per_held_stream(
    server: RunningServer, bodies: list[bytes], path: str = "/assist", headers: dict[str, str] | None = None
) -> float:
    """What the server's RSS grows by per stream while a stream of each body is held open, every
    one read up to its first event (its input taken, its agent running); then all are closed."""
    before = rss_mb(server)
    streams: list[HeldStream] = []
    try:
        for body in bodies:
            stream = HeldStream(server, body, path=path, headers=headers)
            streams.append(stream)
            assert stream.status == 200, stream.received[:300]
            stream.first_event()
        return (rss_mb(server) - before) / len(streams)
    finally:
        for stream in streams:
            stream.close()
