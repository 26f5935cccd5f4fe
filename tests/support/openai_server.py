"""A real OpenAI-compatible chat-completions server on loopback, replaying scripted replies.

Not a mock: it is an HTTP/1.1 server (stdlib ``ThreadingHTTPServer``) running in a
background thread of the test process, so both in-process code and a separate
process (e.g. the uvicorn service started by other tests) can reach it through
``server.base_url``::

    from tests.support.openai_server import FakeOpenAI, error_reply, stream_reply

    with FakeOpenAI() as server:
        server.enqueue(stream_reply(text="Hello there"))
        client = AsyncOpenAI(base_url=server.base_url, api_key="sk-test")
        stream = await client.chat.completions.create(
            model="gpt-test", messages=[...], stream=True,
            stream_options={"include_usage": True},
        )
        ...
        assert server.requests[0].body["messages"][0]["role"] == "system"

Each ``POST .../chat/completions`` takes the next scripted reply (FIFO). With the
queue empty it answers 500 with an OpenAI-style error whose message starts with
"no scripted reply", so a test that under-scripts sees its mistake. Every request
(whatever its path) is recorded in ``server.requests``.

Wire format (checked against the ``openai`` 3.57 client, ``openai/_streaming.py``
and ``openai/types/chat/chat_completion_chunk.py``):

* A streamed reply is ``200``, ``content-type: text/event-stream``,
  ``transfer-encoding: chunked``, ``connection: close``; each SSE event
  (``data: <json>\\n\\n``) is written as its own HTTP chunk, unbuffered, so a client
  sees it when it is sent. The body ends with ``data: [DONE]`` and the terminating
  zero-length chunk, immediately: for HTTP/1.1 the client drains the rest of the
  body for up to 0.1 s after ``[DONE]``, so nothing may follow it.
* Chunks look as OpenAI sends them: ``{"id": "chatcmpl-…", "object":
  "chat.completion.chunk", "created": <int>, "model": <the request's model>,
  "system_fingerprint": …, "choices": [{"index": 0, "delta": {…}, "logprobs": null,
  "finish_reason": null}]}``. The first chunk's delta is ``{"role": "assistant",
  "content": ""}``. Then reasoning deltas, text deltas, tool-call deltas, one chunk
  with an empty delta and the ``finish_reason``; when the request had
  ``stream_options.include_usage`` every chunk carries ``"usage": null`` and a last
  chunk has ``"choices": []`` and the usage totals.
* Mid-stream errors (``fail_after``) are sent the way OpenAI-compatible servers
  (vLLM, OpenRouter, LiteLLM …) send them: an SSE event
  ``data: {"error": {"message": …, "type": "server_error", "code": 500}}``, then the
  body ends (no ``[DONE]``). The openai client raises ``openai.APIError`` (the base
  class itself, not an ``APIStatusError``: there is no ``status_code``) for any
  ``data:`` event whose JSON has a truthy ``"error"`` key; ``exc.message`` is
  ``error["message"]``, ``exc.body`` the ``error`` object, ``exc.code`` is
  ``str(error["code"])`` (``"500"``) and ``exc.type`` is ``error["type"]``. The
  create() call already returned, so the client never retries this.
* A stall (``stall_after``) sends headers and the first N events, then nothing,
  with the connection open, for ``stall_seconds``; then the connection is closed
  without finishing the chunked body. A client with ``timeout=T`` gets
  ``httpx2.ReadTimeout`` after T seconds without bytes, which the openai stream
  re-raises as ``openai.APITimeoutError`` (a subclass of ``APIConnectionError``),
  from the iteration, not from create(), and without retrying. A client that waits
  longer than ``stall_seconds`` instead sees the connection drop mid-body:
  ``openai.APIConnectionError`` caused by ``RemoteProtocolError("peer closed
  connection without sending complete message body (incomplete chunked read)")``.
  Leaving the ``with`` block wakes stalled handlers at once; it never waits for them.
* Error replies (``error_reply``) are plain JSON: ``{"error": {"message", "type",
  "param": null, "code"}}`` with the given status and extra headers. The client
  maps 401 to ``AuthenticationError``, 429 to ``RateLimitError``, >=500 to
  ``InternalServerError`` …, and retries 408/409/429/>=500 up to ``max_retries``
  times (default 2). Its delay honours ``retry-after-ms`` / ``retry-after`` only
  when 0 < delay <= 120 s: ``retry-after: 0`` is ignored and the default backoff
  (0.5 s x 2**n, minus up to 25 % jitter, so 0.375-0.5 s for the first retry)
  applies. For an instant retry send ``{"retry-after-ms": "1"}``.

Requests that do not ask for ``stream=True`` get the same scripted reply folded
into one ``chat.completion`` JSON object.
"""

from __future__ import annotations

import json
import re
import secrets
import socket
import threading
import time
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

__all__ = [
    "FakeOpenAI",
    "RecordedRequest",
    "Reply",
    "ToolCall",
    "error_reply",
    "raw_stream_reply",
    "stream_reply",
]

MID_STREAM_ERROR_MESSAGE = "The server had an error while processing your request."
NO_SCRIPTED_REPLY = "no scripted reply"

# (id, name, arguments): arguments as a dict (sent as its JSON) or a str (sent verbatim,
# e.g. to script malformed JSON).
ToolCall = tuple[str, str, "dict[str, Any] | str"]

_DEFAULT = object()

# status -> (error type, error code) as OpenAI answers them.
_ERROR_DEFAULTS: dict[int, tuple[str, str | None]] = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("invalid_request_error", "unsupported_country_region_territory"),
    404: ("invalid_request_error", "model_not_found"),
    408: ("timeout", None),
    409: ("invalid_request_error", None),
    422: ("invalid_request_error", None),
    429: ("requests", "rate_limit_exceeded"),
}


# --------------------------------------------------------------------------- replies


@dataclass(frozen=True)
class Reply:
    """One scripted answer. Build it with `stream_reply`, `error_reply` or `raw_stream_reply`."""

    kind: Literal["stream", "error", "raw"]
    # stream
    text: str = ""
    text_pieces: int | None = None
    reasoning: str = ""
    reasoning_field: str = "reasoning_content"
    tool_calls: tuple[ToolCall, ...] = ()
    argument_pieces: int = 8
    usage: tuple[int, int] | None = (12, 7)
    finish_reason: str | None = None
    model: str | None = None
    delay: float = 0.0
    stall_after: int | None = None
    stall_seconds: float = 30.0
    fail_after: int | None = None
    # error
    status: int = 200
    error: dict[str, Any] | None = None
    headers: tuple[tuple[str, str], ...] = ()
    # raw
    raw_events: tuple[Any, ...] = ()
    done: bool = True

    # -- building the stream -----------------------------------------------------------

    def events(self, *, model: str = "gpt-test", include_usage: bool = True) -> list[str]:
        """The SSE ``data`` payloads this reply streams, in order, ending with ``[DONE]``.

        Stalls and failures are not included (the server applies them while sending).
        """
        if self.kind == "raw":
            payloads = [e if isinstance(e, str) else _dumps(e) for e in self.raw_events]
            return payloads + (["[DONE]"] if self.done else [])
        if self.kind != "stream":
            raise ValueError("an error reply has no stream events")
        return [_dumps(chunk) for chunk in self.chunks(model=model, include_usage=include_usage)] + ["[DONE]"]

    def chunks(self, *, model: str = "gpt-test", include_usage: bool = True) -> list[dict[str, Any]]:
        """The ``chat.completion.chunk`` objects of a stream reply (without ``[DONE]``)."""
        completion_id = _completion_id()
        created = int(time.time())
        model = self.model or model

        def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
            body: dict[str, Any] = {
                "id": completion_id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "service_tier": "default",
                "system_fingerprint": "fp_fakeopenai",
                "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}],
            }
            if include_usage:
                body["usage"] = None
            return body

        out = [chunk({"role": "assistant", "content": "", "refusal": None})]
        for piece in _split_words(self.reasoning):
            out.append(chunk({"content": None, self.reasoning_field: piece}))
        text_split = _split_even(self.text, self.text_pieces) if self.text_pieces else _split_words(self.text)
        for piece in text_split:
            out.append(chunk({"content": piece}))
        for tool_delta in self._tool_call_deltas():
            out.append(chunk({"tool_calls": [tool_delta]}))
        out.append(chunk({}, self.finish_reason or ("tool_calls" if self.tool_calls else "stop")))
        if include_usage and self.usage is not None:
            prompt, completion = self.usage
            last = {key: value for key, value in out[0].items() if key != "choices"}
            last["choices"] = []
            last["usage"] = _usage(prompt, completion)
            out.append(last)
        return out

    def _tool_call_deltas(self) -> list[dict[str, Any]]:
        """Per call: a header delta, then the argument pieces; calls interleaved round-robin."""
        lanes: list[list[dict[str, Any]]] = []
        for index, (call_id, name, arguments) in enumerate(self.tool_calls):
            lane: list[dict[str, Any]] = [
                {"index": index, "id": call_id, "type": "function", "function": {"name": name, "arguments": ""}}
            ]
            for piece in _split_even(_arguments_json(arguments), self.argument_pieces):
                lane.append({"index": index, "function": {"arguments": piece}})
            lanes.append(lane)
        out: list[dict[str, Any]] = []
        for step in range(max((len(lane) for lane in lanes), default=0)):
            out.extend(lane[step] for lane in lanes if step < len(lane))
        return out

    def completion(self, *, model: str = "gpt-test") -> dict[str, Any]:
        """The same reply as one non-streamed ``chat.completion`` object."""
        message: dict[str, Any] = {"role": "assistant", "content": self.text or None, "refusal": None}
        if self.reasoning:
            message[self.reasoning_field] = self.reasoning
        if self.tool_calls:
            message["tool_calls"] = [
                {"id": call_id, "type": "function", "function": {"name": name, "arguments": _arguments_json(arguments)}}
                for call_id, name, arguments in self.tool_calls
            ]
        body: dict[str, Any] = {
            "id": _completion_id(),
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model or model,
            "service_tier": "default",
            "system_fingerprint": "fp_fakeopenai",
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": self.finish_reason or ("tool_calls" if self.tool_calls else "stop"),
                }
            ],
        }
        if self.usage is not None:
            body["usage"] = _usage(*self.usage)
        return body


def stream_reply(
    *,
    text: str = "",
    text_pieces: int | None = None,
    reasoning: str = "",
    reasoning_field: str = "reasoning_content",
    tool_calls: Sequence[ToolCall] = (),
    argument_pieces: int = 8,
    usage: tuple[int, int] | None = (12, 7),
    delay: float = 0.0,
    stall_after: int | None = None,
    stall_seconds: float = 30.0,
    fail_after: int | None = None,
    finish_reason: str | None = None,
    model: str | None = None,
) -> Reply:
    """A streamed assistant turn.

    Order of deltas: role chunk; ``reasoning`` word by word in the field
    ``reasoning_field`` ("reasoning_content" as DeepSeek/vLLM send it, "reasoning" as
    OpenRouter/Ollama do); ``text`` word by word (whitespace kept in front of each
    word, as tokens are), or in ``text_pieces`` near-equal pieces; then each
    ``(id, name, arguments)`` tool call: a delta with ``index``, ``id``, ``type`` and
    ``function.name`` (``arguments: ""``), then the arguments' JSON in
    ``argument_pieces`` deltas carrying only ``index`` and ``function.arguments``.
    Several calls are interleaved (header 0, header 1, piece 0 of call 0, piece 0 of
    call 1, piece 1 of call 0, ...), as parallel tool calls can arrive.
    ``finish_reason`` defaults to "tool_calls" if there are calls, else "stop".
    ``usage=(prompt, completion)`` is sent only when the request asked for it
    (``stream_options.include_usage``). ``model`` defaults to the request's model.

    ``delay``: seconds between events. ``stall_after=N``: send N events (counting
    every ``data:`` line: role chunk, deltas, finish, usage, ``[DONE]``), then send
    nothing for ``stall_seconds`` while keeping the connection open, then drop it.
    ``fail_after=N``: send N events, then a mid-stream error event and end the body.
    """
    if stall_after is not None and fail_after is not None:
        raise ValueError("choose stall_after or fail_after, not both")
    if text_pieces is not None and text_pieces < 1:
        raise ValueError("text_pieces must be >= 1")
    if argument_pieces < 1:
        raise ValueError("argument_pieces must be >= 1")
    return Reply(
        kind="stream",
        text=text,
        text_pieces=text_pieces,
        reasoning=reasoning,
        reasoning_field=reasoning_field,
        tool_calls=tuple((str(i), str(n), a) for i, n, a in tool_calls),
        argument_pieces=argument_pieces,
        usage=usage,
        delay=delay,
        stall_after=stall_after,
        stall_seconds=stall_seconds,
        fail_after=fail_after,
        finish_reason=finish_reason,
        model=model,
    )


def error_reply(
    status: int,
    message: str,
    *,
    headers: dict[str, str] | None = None,
    type_: str | None = None,
    code: Any = _DEFAULT,
    param: str | None = None,
) -> Reply:
    """A non-streamed JSON error: ``{"error": {"message", "type", "param", "code"}}``.

    ``type_``/``code`` default by status as OpenAI answers: 401 → invalid_request_error
    / "invalid_api_key"; 429 → "requests" / "rate_limit_exceeded"; >=500 →
    "server_error" / null; other 4xx → invalid_request_error / null (404:
    "model_not_found"). E.g. ``error_reply(429, "Rate limit reached",
    headers={"retry-after": "0"})``.
    """
    if not 400 <= status <= 599:
        raise ValueError("an error reply needs a 4xx or 5xx status")
    default_type, default_code = _ERROR_DEFAULTS.get(
        status, ("server_error", None) if status >= 500 else ("invalid_request_error", None)
    )
    error = {
        "message": message,
        "type": type_ if type_ is not None else default_type,
        "param": param,
        "code": default_code if code is _DEFAULT else code,
    }
    return Reply(kind="error", status=status, error=error, headers=tuple((headers or {}).items()))


def raw_stream_reply(
    events: Iterable[dict[str, Any] | str],
    *,
    done: bool = True,
    delay: float = 0.0,
    stall_after: int | None = None,
    stall_seconds: float = 30.0,
) -> Reply:
    """A stream of hand-written events: dicts are sent as JSON, strings verbatim, each as
    one ``data:`` line; ``[DONE]`` is appended when ``done``. For shapes `stream_reply`
    does not produce (odd providers, malformed chunks)."""
    return Reply(
        kind="raw",
        raw_events=tuple(events),
        done=done,
        delay=delay,
        stall_after=stall_after,
        stall_seconds=stall_seconds,
    )


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _completion_id() -> str:
    return "chatcmpl-" + secrets.token_hex(12)


def _usage(prompt: int, completion: int) -> dict[str, int]:
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def _arguments_json(arguments: dict[str, Any] | str) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)


_WORD = re.compile(r"\s*\S+|\s+")


def _split_words(text: str) -> list[str]:
    """Word-like pieces, leading whitespace attached (" world"), concatenating to `text`."""
    return _WORD.findall(text)


def _split_even(text: str, pieces: int) -> list[str]:
    """At most `pieces` non-empty near-equal pieces concatenating to `text`."""
    if not text:
        return []
    pieces = max(1, min(pieces, len(text)))
    size, extra = divmod(len(text), pieces)
    out, start = [], 0
    for i in range(pieces):
        end = start + size + (1 if i < extra else 0)
        out.append(text[start:end])
        start = end
    return out


# --------------------------------------------------------------------------- recording


@dataclass
class RecordedRequest:
    """One request as received. ``headers`` has lowercase keys; ``body`` is the parsed
    JSON (None if the body was empty or not JSON; the bytes are in ``raw``)."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    raw: bytes = field(repr=False, default=b"")

    @property
    def messages(self) -> list[dict[str, Any]]:
        return (self.body or {}).get("messages", []) if isinstance(self.body, dict) else []

    @property
    def authorization(self) -> str | None:
        return self.headers.get("authorization")


# --------------------------------------------------------------------------- server


class _Server(ThreadingHTTPServer):
    daemon_threads = True  # a stalled handler never keeps the process alive
    block_on_close = False  # server_close() does not join handler threads
    allow_reuse_address = True

    fake: FakeOpenAI

    def handle_error(self, request: Any, client_address: Any) -> None:
        import sys

        error = sys.exc_info()[1]
        if isinstance(error, (ConnectionError, TimeoutError, OSError)):
            return  # the client went away (e.g. it timed out on a stall): expected
        if error is not None:
            self.fake._handler_errors.append(error)
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "FakeOpenAI/1.0"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def setup(self) -> None:
        super().setup()
        self.server.fake._track(self.connection, add=True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.fake._track(self.connection, add=False)

    # -- plumbing ------------------------------------------------------------------------

    def _read_body(self) -> bytes:
        if "chunked" in self.headers.get("transfer-encoding", "").lower():
            data = bytearray()
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return bytes(data)
                data += self.rfile.read(size)
                self.rfile.readline()
        length = int(self.headers.get("content-length") or 0)
        return self.rfile.read(length) if length else b""

    def _record(self) -> RecordedRequest:
        raw = self._read_body()
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        request = RecordedRequest(
            method=self.command,
            path=self.path,
            headers={key.lower(): value for key, value in self.headers.items()},
            body=body,
            raw=raw,
        )
        self.server.fake._record(request)
        return request

    def _start(self, status: int, headers: dict[str, str]) -> None:
        self.close_connection = True
        self.send_response(status)
        self.send_header("x-request-id", "req_" + secrets.token_hex(12))
        self.send_header("openai-processing-ms", "1")
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("connection", "close")
        self.end_headers()

    def _send_json(self, status: int, body: Any, headers: Sequence[tuple[str, str]] = ()) -> None:
        data = json.dumps(body).encode()
        self._start(status, {"content-type": "application/json", "content-length": str(len(data)), **dict(headers)})
        self.wfile.write(data)

    def _send_error_json(self, status: int, message: str, type_: str) -> None:
        error = {"message": message, "type": type_, "param": None, "code": None}
        self._send_json(status, {"error": error})

    def _chunk(self, payload: str) -> None:
        data = f"data: {payload}\n\n".encode()
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    # -- routes ----------------------------------------------------------------------

    def do_GET(self) -> None:
        request = self._record()
        if request.path.rstrip("/").endswith("/models"):
            self._send_json(
                200,
                {"object": "list", "data": [{"id": "gpt-test", "object": "model", "created": 0, "owned_by": "fake"}]},
            )
        else:
            self._send_error_json(404, f"Unknown path: GET {request.path}", "invalid_request_error")

    def do_POST(self) -> None:
        request = self._record()
        if not request.path.split("?")[0].rstrip("/").endswith("/chat/completions"):
            self._send_error_json(404, f"Unknown path: POST {request.path}", "invalid_request_error")
            return
        if not isinstance(request.body, dict):
            self._send_error_json(400, "We could not parse the JSON body of your request.", "invalid_request_error")
            return
        reply = self.server.fake._next_reply()
        if reply is None:
            self._send_error_json(
                500,
                f"{NO_SCRIPTED_REPLY}: FakeOpenAI got request #{self.server.fake._count} with an empty queue",
                "fake_openai_error",
            )
            return
        if reply.kind == "error":
            self._send_json(reply.status, {"error": reply.error}, reply.headers)
            return

        body = request.body
        model = str(body.get("model") or "gpt-test")
        if not body.get("stream"):
            self._answer_unstreamed(reply, model)
            return
        options = body.get("stream_options") or {}
        include_usage = bool(isinstance(options, dict) and options.get("include_usage"))
        self._stream(reply, reply.events(model=model, include_usage=include_usage))

    def _answer_unstreamed(self, reply: Reply, model: str) -> None:
        if reply.kind == "raw":
            self._send_error_json(400, "a raw_stream_reply needs stream=True", "fake_openai_error")
        elif reply.stall_after is not None:
            self.server.fake._sleep(reply.stall_seconds)  # then drop the connection unanswered
        elif reply.fail_after is not None:
            self._send_error_json(500, MID_STREAM_ERROR_MESSAGE, "server_error")
        else:
            self._send_json(200, reply.completion(model=model), reply.headers)

    def _stream(self, reply: Reply, events: list[str]) -> None:
        fake = self.server.fake
        self._start(
            200,
            {
                "content-type": "text/event-stream; charset=utf-8",
                "cache-control": "no-cache",
                "transfer-encoding": "chunked",
            },
        )
        for number, payload in enumerate(events):
            if reply.stall_after is not None and number == reply.stall_after:
                fake._sleep(reply.stall_seconds)
                return  # drop the connection: chunked body left unfinished
            if reply.fail_after is not None and number == reply.fail_after:
                error = {"message": MID_STREAM_ERROR_MESSAGE, "type": "server_error", "code": 500}
                self._chunk(_dumps({"error": error}))
                break
            if number and reply.delay:
                if fake._sleep(reply.delay):
                    return
            self._chunk(payload)
        self.wfile.write(b"0\r\n\r\n")


class FakeOpenAI:
    """A loopback OpenAI chat-completions server replaying scripted replies (FIFO).

    ``with FakeOpenAI() as server:`` starts it; ``server.base_url`` is
    ``http://127.0.0.1:PORT/v1``. Thread-safe: ``enqueue``, ``requests`` and ``reset``
    may be called from any thread while requests are served, each on its own thread.
    """

    def __init__(self, host: str = "127.0.0.1") -> None:
        self._host = host
        self._lock = threading.Condition()
        self._replies: deque[Reply] = deque()
        self._requests: list[RecordedRequest] = []
        self._count = 0
        self._closing = threading.Event()
        self._connections: set[socket.socket] = set()
        self._handler_errors: list[BaseException] = []
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------------

    def start(self) -> FakeOpenAI:
        if self._server is not None:
            raise RuntimeError("FakeOpenAI already started")
        self._closing.clear()
        server = _Server((self._host, 0), _Handler)
        server.fake = self
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="fake-openai", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        self._closing.set()  # wakes stalled and delayed handlers
        server.shutdown()
        server.server_close()
        with self._lock:
            connections = list(self._connections)
        for connection in connections:
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self.stop()
        if exc_type is None and self._handler_errors:
            raise RuntimeError(f"FakeOpenAI handler crashed: {self._handler_errors[0]!r}") from self._handler_errors[0]

    # -- addresses -------------------------------------------------------------------

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("FakeOpenAI is not running")
        return self._server.server_address[1]

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT`` (no ``/v1``)."""
        return f"http://{self._host}:{self.port}"

    @property
    def base_url(self) -> str:
        """What to pass as ``AsyncOpenAI(base_url=...)``."""
        return f"{self.url}/v1"

    # -- script and record -----------------------------------------------------------

    def enqueue(self, *replies: Reply | str) -> None:
        """Queue replies for the next chat-completions requests, in order. A str is short
        for ``stream_reply(text=...)``."""
        built = [stream_reply(text=r) if isinstance(r, str) else r for r in replies]
        for reply in built:
            if not isinstance(reply, Reply):
                raise TypeError(f"not a Reply: {reply!r}")
        with self._lock:
            self._replies.extend(built)

    @property
    def pending(self) -> int:
        """Scripted replies not consumed yet."""
        with self._lock:
            return len(self._replies)

    @property
    def requests(self) -> list[RecordedRequest]:
        """A snapshot of every request received so far, in arrival order."""
        with self._lock:
            return list(self._requests)

    @property
    def completion_requests(self) -> list[RecordedRequest]:
        """Only the ``POST .../chat/completions`` requests."""
        return [
            r
            for r in self.requests
            if r.method == "POST" and r.path.split("?")[0].rstrip("/").endswith("/chat/completions")
        ]

    def wait_for_requests(self, count: int, timeout: float = 5.0) -> list[RecordedRequest]:
        """Block until at least ``count`` requests arrived (e.g. from another process)."""
        with self._lock:
            if not self._lock.wait_for(lambda: len(self._requests) >= count, timeout=timeout):
                raise TimeoutError(f"FakeOpenAI got {len(self._requests)} requests, expected {count}")
            return list(self._requests)

    def reset(self) -> None:
        """Forget queued replies and recorded requests."""
        with self._lock:
            self._replies.clear()
            self._requests.clear()
            self._count = 0
            self._handler_errors.clear()

    # -- used by the handler ---------------------------------------------------------

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self._requests.append(request)
            self._lock.notify_all()

    def _next_reply(self) -> Reply | None:
        with self._lock:
            self._count += 1
            return self._replies.popleft() if self._replies else None

    def _track(self, connection: socket.socket, *, add: bool) -> None:
        with self._lock:
            (self._connections.add if add else self._connections.discard)(connection)

    def _sleep(self, seconds: float) -> bool:
        """Sleep, waking early when the server stops. True if it is stopping."""
        return self._closing.wait(seconds)
