"""SIGTERM with streams open: each may finish within ASSIST_SHUTDOWN_GRACE, else ends with 503 and done."""

from __future__ import annotations

import signal

from tests.server.test_stream_guarantees import assert_streams_completed, assert_well_ended
from tests.support.server import RunningServer, running_server
from tests.support.sse import Frame, Stream, new_body, read_stream


def stream_and_stop(server: RunningServer, prompt: str) -> tuple[Stream, list[Frame]]:
    """Read a stream, sending SIGTERM to the server once the answer has started: the stream, and
    the frames that came after the signal."""
    after_signal: list[Frame] = []
    signalled = False

    def stop_once_streaming(frame: Frame) -> None:
        nonlocal signalled
        if signalled:
            after_signal.append(frame)
        elif frame.event_name == "FINAL_RESPONSE":
            server.process.send_signal(signal.SIGTERM)
            signalled = True

    stream = read_stream(server.url, new_body(prompt), timeout=30, on_frame=stop_once_streaming)
    assert signalled, "the stream never started"
    return stream, after_signal


def assert_exited_cleanly(server: RunningServer) -> None:
    # uvicorn re-raises the signal it handled once it has shut down cleanly.
    assert server.process.wait(timeout=15) in (0, -signal.SIGTERM)
    assert "Application shutdown complete" in server.log()
    assert "Traceback" not in server.log()


def test_a_stream_still_open_after_the_grace_period_ends_with_503_and_done():
    with running_server({"ASSIST_SHUTDOWN_GRACE": "1"}) as server:
        stream, after_signal = stream_and_stop(server, "slow")
        assert_well_ended(stream)
        assert_streams_completed(stream)
        error = stream.events[-2]
        assert error["event_name"] == "error" and error["content"]["error_code"] == 503
        assert error["content"]["details"]["request_id"] == stream.headers["x-request-id"]
        # The stream ran on through the grace period (its chunks still came), then was ended.
        words = [f.json for f in after_signal if f.event_name == "FINAL_RESPONSE" and not f.json["is_complete"]]
        assert words, "the stream should run on for the grace period, then end"
        assert_exited_cleanly(server)


def test_a_stream_that_finishes_within_the_grace_period_is_not_cut():
    with running_server({"ASSIST_SHUTDOWN_GRACE": "20"}) as server:
        stream, _ = stream_and_stop(server, "What is new?")
        assert_well_ended(stream)
        assert_streams_completed(stream)
        assert "error" not in stream.names()
        answer = "".join(e["content"] for e in stream.events if e["event_name"] == "FINAL_RESPONSE")
        assert answer.endswith("'slow' too.")
        assert_exited_cleanly(server)
