"""SIGTERM with streams open: each ends with `error` (503) and `done`, and the process exits."""

from __future__ import annotations

import signal

from tests.server.test_stream_guarantees import assert_streams_completed, assert_well_ended
from tests.support.server import running_server
from tests.support.sse import Frame, new_body, read_stream


def test_sigterm_ends_open_streams_with_503_and_done_and_the_server_exits():
    with running_server() as server:
        signalled = []

        def stop_server_once_streaming(frame: Frame) -> None:
            if frame.event_name == "FINAL_RESPONSE" and not signalled:
                server.process.send_signal(signal.SIGTERM)
                signalled.append(True)

        stream = read_stream(server.url, new_body("slow"), timeout=20, on_frame=stop_server_once_streaming)
        assert signalled
        assert_well_ended(stream)
        assert_streams_completed(stream)
        error = stream.events[-2]
        assert error["event_name"] == "error" and error["content"]["error_code"] == 503
        # uvicorn re-raises the signal it handled once it has shut down cleanly.
        assert server.process.wait(timeout=10) in (0, -signal.SIGTERM)
        assert "Application shutdown complete" in server.log()
