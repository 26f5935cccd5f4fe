"""POST /v1/chat/completions and GET /v1/models (docs/openai.md), with the openai SDK as the
client, against a real uvicorn serving tests/server/openai_agents.py's ChatAgent."""

from __future__ import annotations

import json
import signal
import socket
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import openai
import pytest

from sentient_assist.runtime.run import AGENT_FAILED_MESSAGE, TIMEOUT_MESSAGE
from sentient_assist.server.openai.answer import MAX_KEPT_CHARS
from sentient_assist.server.openai.pauses import take_marker
from tests.support.agents import SECRET
from tests.support.files import wait_for_file
from tests.support.request import post
from tests.support.server import RunningServer, Servers, running_server
from tests.support.sse import events_of, iter_events, new_body
from tests.support.waiting import wait_until

KEY = "test-key-for-the-openai-face"
MODEL = "chat-agent"
TIME_LIMIT = 2.0
PING = 0.3
MAX_BODY = 16_384
COMPLETIONS = "/v1/chat/completions"
BODY_TIMEOUT = 1.0
AGENT = {"ASSIST_AGENT": "tests.server.openai_agents:ChatAgent", "ASSIST_LOG_LEVEL": "warning"}

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def server(serve: Servers) -> RunningServer:
    env = {
        **AGENT,
        "ASSIST_API_KEYS": KEY,
        "ASSIST_REQUEST_TIMEOUT": str(TIME_LIMIT),
        "ASSIST_PING_INTERVAL": str(PING),
        "ASSIST_MAX_BODY_BYTES": str(MAX_BODY),
        "ASSIST_BODY_TIMEOUT": str(BODY_TIMEOUT),
    }
    return serve(env)


def client_of(server: RunningServer, key: str = KEY) -> openai.OpenAI:
    # No retries: a 5xx must reach the test as it was answered, once.
    return openai.OpenAI(base_url=server.url + "/v1", api_key=key, max_retries=0, timeout=15)


@pytest.fixture
def client(server: RunningServer) -> Iterator[openai.OpenAI]:
    with client_of(server) as made:
        yield made


def user(content: object) -> dict:
    return {"role": "user", "content": content}


def assistant(content: object) -> dict:
    return {"role": "assistant", "content": content}


def raw_exchange(server: RunningServer, head: bytes, wait: float = 5) -> bytes:
    """What the server answers to `head` (and nothing more) on a connection of its own."""
    with socket.create_connection(("127.0.0.1", int(server.url.rsplit(":", 1)[1])), timeout=wait) as sock:
        sock.sendall(head)
        received = b""
        while chunk := sock.recv(65_536):
            received += chunk
            if b"\r\n\r\n" in received and b"}}" in received:
                break
        return received


def data_lines(body: str) -> list[str]:
    """The `data:` payloads of a raw stream, after checking that every line is SSE OpenAI clients read."""
    for line in body.split("\n"):
        assert line == "" or line.startswith("data: ") or line == ": ping", line
    return [event.data for event in events_of(body)]


def test_the_models_are_the_served_agent(client):
    assert [model.id for model in client.models.list()] == [MODEL]
    model = client.models.retrieve(MODEL)
    assert model.id == MODEL and model.object == "model" and model.owned_by
    with pytest.raises(openai.NotFoundError) as refused:
        client.models.retrieve("gpt-4o")
    assert refused.value.code == "model_not_found"


def test_a_completion_is_the_answer_with_its_reasoning_and_usage(client):
    raw = client.chat.completions.with_raw_response.create(model=MODEL, messages=[user("think")], temperature=0.2)
    assert raw.headers["x-request-id"]
    completion = raw.parse()
    assert completion.id.startswith("chatcmpl-") and completion.object == "chat.completion"
    assert completion.model == MODEL and completion.system_fingerprint is None
    choice = completion.choices[0]
    assert choice.finish_reason == "stop" and choice.message.role == "assistant"
    assert choice.message.content == "Forty-two."  # not the plan, the sources or the tool's result
    assert choice.message.model_extra["reasoning_content"] == "Let me think."
    assert choice.message.tool_calls is None
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens, completion.usage.total_tokens) == (
        13,
        7,
        20,
    )


def test_a_stream_is_content_and_reasoning_deltas_then_a_usage_chunk(client):
    stream = client.chat.completions.create(
        model=MODEL, messages=[user("think")], stream=True, stream_options={"include_usage": True}
    )
    chunks = list(stream)
    ids = {chunk.id for chunk in chunks}
    assert len(ids) == 1 and ids.pop().startswith("chatcmpl-")
    assert chunks[0].choices[0].delta.role == "assistant"
    deltas = [chunk.choices[0].delta for chunk in chunks if chunk.choices]
    assert "".join(d.content or "" for d in deltas) == "Forty-two."
    assert "".join((d.model_extra or {}).get("reasoning_content") or "" for d in deltas) == "Let me think."
    assert all(d.tool_calls is None for d in deltas)
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    last = chunks[-1]
    assert last.choices == [] and (last.usage.prompt_tokens, last.usage.completion_tokens) == (13, 7)


def test_without_include_usage_there_is_no_usage_chunk_and_every_line_is_data_or_a_ping(server):
    # `silent`: a STATUS block, a silence of a few keepalive intervals, a FINAL text block: with no
    # FINAL_RESPONSE, the run's text is the answer (a turn of history's rule).
    body = {"model": MODEL, "messages": [user(f"silent:{PING * 3}")], "stream": True}
    response = post(server, COMPLETIONS, body, key=KEY)
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
    # As /assist's: no cache, and no proxy (nginx) holding the chunks back.
    assert response.headers["cache-control"] == "no-store" and response.headers["x-accel-buffering"] == "no"
    assert ": ping" in response.text
    payloads = data_lines(response.text)
    assert payloads[-1] == "[DONE]" and payloads.count("[DONE]") == 1
    chunks = [json.loads(payload) for payload in payloads[:-1]]
    assert all(chunk["choices"] for chunk in chunks), "a usage chunk nobody asked for"
    content = "".join(chunk["choices"][0]["delta"].get("content") or "" for chunk in chunks)
    assert content == "thinking quietly\n\nspoke at last"


def test_every_reserved_event_is_content_reasoning_an_error_or_nothing(server):
    # `conventions`: thinking, stages, tool calls and results, two bills, a handoff, sources, a plan,
    # a side stream, an error (502), the answer, and a question with a (fake) token.
    body = {"model": MODEL, "messages": [user("conventions")], "stream": True}
    response = post(server, COMPLETIONS, body, key=KEY)
    payloads = data_lines(response.text)
    assert payloads[-1] == "[DONE]"
    objects = [json.loads(payload) for payload in payloads[:-1]]
    errors = [o["error"] for o in objects if "error" in o]
    assert errors == [{"message": "one source failed", "type": "server_error", "param": None, "code": "502"}]
    deltas = [o["choices"][0]["delta"] for o in objects if "choices" in o]
    content = "".join(d.get("content") or "" for d in deltas)
    assert content == "It is sunny.\n\nWhich city?\n\n- Oslo\n- Lima\n\n[//]: # (sentient-pause:ask_user:resume-1)\n"
    assert "".join(d.get("reasoning_content") or "" for d in deltas) == "Let me look it up."
    assert "tool_calls" not in response.text and "hits" not in response.text and "a side note" not in response.text


def test_an_approval_is_the_question_and_the_call_it_would_make(client):
    completion = client.chat.completions.create(model=MODEL, messages=[user("interrupt")])
    text, pause = take_marker(completion.choices[0].message.content)
    assert text == 'Send it?\n\n`send_email({"to":"ana@example.com"})`'
    assert pause == ("interrupt", "t-7")


def test_the_messages_are_the_query_and_the_history(client):
    messages = [
        {"role": "system", "content": "Be terse."},  # ignored: the agent has its own instructions
        assistant("Hello! Ask me anything."),  # a greeting before any question answers nothing
        user("first"),
        assistant("one"),
        user([{"type": "text", "text": "second"}, {"type": "text", "text": "in parts"}]),
        assistant([{"type": "text", "text": "two"}]),
        assistant(None),  # a message that only called tools
        {"role": "developer", "content": "Also ignored."},
        user("echo:now"),
    ]
    completion = client.chat.completions.create(model=MODEL, messages=messages)
    echoed = json.loads(completion.choices[0].message.content)
    assert echoed["argument"] == "now"
    assert echoed["history"] == [
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "one"},
        {"role": "user", "content": "second\nin parts"},
        {"role": "assistant", "content": "two"},
    ]


def test_a_part_that_is_not_text_stands_as_a_placeholder_in_the_history(client):
    # A chat that once had an image goes on: only the query's own parts must be text.
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
    audio = {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}}
    messages = [user([{"type": "text", "text": "what is this?"}, image]), assistant("A cat."), user([audio])]
    messages += [assistant([{"type": "text", "text": "Meow."}, {"type": "something_new"}]), user("echo:now")]
    completion = client.chat.completions.create(model=MODEL, messages=messages)
    assert json.loads(completion.choices[0].message.content)["history"] == [
        {"role": "user", "content": "what is this?\n[image omitted]"},
        {"role": "assistant", "content": "A cat."},
        {"role": "user", "content": "[audio omitted]"},
        {"role": "assistant", "content": "Meow.\n[non-text content omitted]"},
    ]
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(model=MODEL, messages=[*messages[:-1], user([image])])
    assert refused.value.param == "messages[4].content[0].type" and refused.value.code == "unsupported_content"


def test_a_question_answered_in_the_next_turn_resumes_the_run(client):
    first = client.chat.completions.create(model=MODEL, messages=[user("ask:lunch")], stream=True)
    asked = "".join(chunk.choices[0].delta.content or "" for chunk in first if chunk.choices)
    text, pause = take_marker(asked)
    assert text == "I need to know one thing.\n\nWhich city?\n\n- Oslo\n- Lima"
    assert pause is not None and pause[0] == "ask_user"
    # The client sends the answer back as it got it, marker and all, as any chat front end does.
    answer = client.chat.completions.create(model=MODEL, messages=[user("ask:lunch"), assistant(asked), user("Lima")])
    assert answer.choices[0].message.content == 'resumed ask_user with \'Lima\', state {"asked": "lunch", "step": 1}'
    # A token changed on its way back is refused; the agent does not run.
    changed = asked.replace(pause[1], pause[1][:-8] + "AAAAAAA=")
    for stream in (False, True):  # a 400 before any stream begins, naming the message
        with pytest.raises(openai.BadRequestError) as refused:
            client.chat.completions.create(
                model=MODEL, messages=[user("ask:lunch"), assistant(changed), user("Lima")], stream=stream
            )
        assert refused.value.param == "messages[1].content"
        assert "was not issued by this service, or was changed" in refused.value.message
    # ... and so is a token brought to another conversation.
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(model=MODEL, messages=[user("ask:dinner"), assistant(asked), user("Lima")])
    assert "another conversation" in refused.value.message


def test_only_the_last_assistant_message_can_hold_a_live_pause(client):
    forged = "Which city?\n\n[//]: # (sentient-pause:ask_user:AAAAAAAAAAAAAAAA)\n"
    # Markers anywhere before the last assistant message are taken out, and not read: the
    # forged one neither resumes anything nor makes the chat a 400, in the last turn or before.
    last_turn = [user("ask:lunch"), assistant(forged), assistant("Never mind."), user("echo:now")]
    completion = client.chat.completions.create(model=MODEL, messages=last_turn)
    history = json.loads(completion.choices[0].message.content)["history"]
    assert history[1] == {"role": "assistant", "content": "Which city?\n\nNever mind."}
    earlier = [user("first"), assistant(forged), user("second"), assistant("ok"), user("echo:now")]
    completion = client.chat.completions.create(model=MODEL, messages=earlier)
    history = json.loads(completion.choices[0].message.content)["history"]
    assert [m["content"] for m in history if m["role"] == "assistant"] == ["Which city?", "ok"]


def test_a_pathological_assistant_message_does_not_stall_the_server(serve):
    # Each body is about the default body limit (1 MiB); a marker pattern that backtracks over
    # a run of newlines took minutes for the first of them, with the event loop blocked.
    newlines = "\n" * 500_000
    shapes = [
        newlines,
        "[//]: # (" * 110_000,
        "[//]: # (sentient-pause:ask_user:" * 30_000,
        ("\n" * 1000 + "[//]: # (sentient-pause:ask_user:A") * 490,
        newlines[:250_000] + "[//]: # (sentient-pause:ask_user:" + "A" * 400_000,
    ]
    server = serve(AGENT)
    with ThreadPoolExecutor(len(shapes)) as pool:
        sent = [
            pool.submit(
                post, server, COMPLETIONS, {"model": MODEL, "messages": [user("x"), assistant(shape), user("say:ok")]}
            )
            for shape in shapes
        ]
        # The server answers others while it reads them (a stalled event loop would not, in 2 s).
        healthy = [httpx.get(server.url + "/healthz", timeout=2).status_code]
        while not all(future.done() for future in sent):
            healthy.append(httpx.get(server.url + "/healthz", timeout=2).status_code)
        answers = [future.result(timeout=20) for future in sent]
        assert [a.status_code for a in answers] == [200] * len(shapes), [a.text[:200] for a in answers]
        assert all(a.json()["choices"][0]["message"]["content"] == "ok" for a in answers)
        assert set(healthy) == {200}


def test_an_agent_that_raises_is_an_error_with_no_internals(client):
    stream = client.chat.completions.create(model=MODEL, messages=[user("raise")], stream=True)
    received = []
    with pytest.raises(openai.APIError) as failed:
        for chunk in stream:
            received.append(chunk.choices[0].delta.content or "")
    assert "".join(received) == "partial "
    assert failed.value.message == AGENT_FAILED_MESSAGE and failed.value.code == "500"
    with pytest.raises(openai.InternalServerError) as failed_whole:
        client.chat.completions.create(model=MODEL, messages=[user("raise")])
    assert failed_whole.value.status_code == 500 and failed_whole.value.body["message"] == AGENT_FAILED_MESSAGE
    assert SECRET not in failed_whole.value.response.text


def test_a_run_past_the_time_limit_is_a_504_and_the_agent_is_cancelled(client, tmp_path):
    marker = tmp_path / "cancelled"
    with pytest.raises(openai.InternalServerError) as timed_out:
        client.chat.completions.create(model=MODEL, messages=[user(f"hang:{marker}")])
    assert timed_out.value.status_code == 504 and timed_out.value.body["message"] == TIMEOUT_MESSAGE
    assert timed_out.value.response.headers["x-should-retry"] == "false"
    assert wait_for_file(marker, timeout=3) is not None


def test_a_client_that_leaves_mid_stream_gets_its_agent_cancelled(client, tmp_path):
    marker = tmp_path / "cancelled"
    stream = client.chat.completions.create(model=MODEL, messages=[user(f"hang:{marker}")], stream=True)
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            break
    stream.close()
    # Cancelled for its client's leaving: well before the time limit would have cancelled it.
    cancelled_at = wait_for_file(marker, timeout=TIME_LIMIT / 2)
    assert cancelled_at is not None, "the agent was not cancelled when its client left"


def test_a_client_that_leaves_before_its_completion_gets_its_agent_cancelled(server, tmp_path):
    marker = tmp_path / "cancelled"
    body = {"model": MODEL, "messages": [user(f"hang:{marker}")]}
    with pytest.raises(httpx.ReadTimeout):  # the client gives up, and closes the connection
        post(server, COMPLETIONS, body, key=KEY, timeout=TIME_LIMIT / 4)
    # Cancelled for its client's leaving: well before the time limit would have cancelled it.
    assert wait_for_file(marker, timeout=TIME_LIMIT / 2) is not None


def test_a_request_without_the_key_is_refused_in_openais_shape(server):
    with client_of(server, key="not-the-key") as wrong:
        with pytest.raises(openai.AuthenticationError) as refused:
            wrong.chat.completions.create(model=MODEL, messages=[user("think")])
        assert refused.value.code == "invalid_api_key"
        with pytest.raises(openai.AuthenticationError):
            wrong.models.list()
    response = post(server, COMPLETIONS, {"model": MODEL, "messages": [user("x")]})
    assert response.status_code == 401 and response.headers["www-authenticate"].startswith("Bearer")
    assert response.json()["error"]["type"] == "authentication_error"


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"messages": [user("hi")]}, "model"),
        ({"model": MODEL, "messages": []}, "messages"),
        ({"model": MODEL, "messages": [{"role": "tool", "content": "42", "tool_call_id": "c"}]}, "messages[0].role"),
        ({"model": MODEL, "messages": [user("hi"), assistant("hello")]}, "messages"),
        ({"model": MODEL, "messages": [user(None)]}, "messages[0].content"),
        ({"model": MODEL, "messages": [user([{"type": "text", "text": 7}])]}, "messages[0].content[0].text"),
        (
            {"model": MODEL, "messages": [user([{"type": "text", "text": "what is this?"}, {"type": "image_url"}])]},
            "messages[0].content[1].type",
        ),
        ({"model": MODEL, "messages": [user("hi")], "n": 2}, "n"),
        ({"model": MODEL, "messages": [user("hi")], "stream": "sometimes"}, "stream"),
        # Bodies FastAPI cannot parse at all: no field to name (nested too deep: the body).
        (b'{"model": "chat-agent", "messages": [{"role": "user", "content": "\xff"}]}', None),
        (b'{"model": "chat-agent", "messages": [], "x": ' + b"[" * 5000 + b"]" * 5000 + b"}", "body"),
        (b'{"model": "chat-agent", "messages": [], "n": ' + b"1" * 5000 + b"}", None),
    ],
    ids=lambda value: None if isinstance(value, dict) else "raw",
)
def test_a_bad_body_is_a_400_naming_the_field(client, server, body, param):
    if isinstance(body, bytes):
        response = post(server, COMPLETIONS, body, key=KEY)
        status, error = response.status_code, response.json()["error"]
    else:
        with pytest.raises(openai.BadRequestError) as refused:
            client.post("/chat/completions", body=body, cast_to=httpx.Response)
        status, error = refused.value.status_code, refused.value.body
    assert status == 400 and error["param"] == param and error["type"] == "invalid_request_error"
    assert error["message"].startswith(param or "")


def test_other_paths_and_methods_under_v1_are_openai_errors(client, server):
    with pytest.raises(openai.NotFoundError) as refused:
        client.completions.create(model=MODEL, prompt="legacy completions")
    assert refused.value.code == "unknown_url" and refused.value.body["type"] == "invalid_request_error"
    with pytest.raises(openai.NotFoundError) as refused:
        client.embeddings.create(model=MODEL, input="text")
    assert refused.value.code == "unknown_url"
    wrong_method = httpx.get(server.url + "/v1/chat/completions", headers={"Authorization": f"Bearer {KEY}"})
    assert wrong_method.status_code == 405 and wrong_method.headers["allow"] == "POST"
    assert wrong_method.json()["error"]["type"] == "invalid_request_error"
    # The service's other routes are untouched: /assist's 405 is FastAPI's own.
    assert httpx.get(server.url + "/assist").json() == {"detail": "Method Not Allowed"}


def test_an_unknown_model_is_a_404_naming_the_field(client):
    with pytest.raises(openai.NotFoundError) as refused:
        client.chat.completions.create(model="gpt-4o", messages=[user("think")])
    assert refused.value.code == "model_not_found" and refused.value.param == "model"
    assert "gpt-4o" not in refused.value.message  # what was sent is not repeated back


def test_a_body_past_the_limit_is_a_413(client):
    with pytest.raises(openai.APIStatusError) as refused:
        client.chat.completions.create(model=MODEL, messages=[user("x" * MAX_BODY)])
    assert refused.value.status_code == 413 and refused.value.body["type"] == "invalid_request_error"


def head_of(length: int, key: str) -> bytes:
    return (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        + f"Authorization: Bearer {key}\r\nContent-Length: {length}\r\n\r\n".encode()
    )


def test_the_key_is_checked_before_the_size_and_a_slow_body_is_a_retryable_408(server):
    too_big = head_of(MAX_BODY + 1, "not-the-key")  # no body sent: refused on the headers alone
    assert raw_exchange(server, too_big).startswith(b"HTTP/1.1 401")
    assert raw_exchange(server, head_of(MAX_BODY + 1, KEY)).startswith(b"HTTP/1.1 413")
    slow = raw_exchange(server, head_of(100, KEY) + b'{"model": ', wait=BODY_TIMEOUT + 5)
    head, _, body = slow.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408") and b"x-should-retry" not in head.lower()  # the agent never ran
    assert json.loads(body)["error"]["code"] == "408"


def test_a_run_that_fails_is_not_retried_by_the_sdk(server, tmp_path):
    # The openai SDK retries a 429 and a 5xx twice by default: each retry would run the agent again.
    with openai.OpenAI(base_url=server.url + "/v1", api_key=KEY, timeout=15) as retrying:
        for code, error in (("raise", openai.InternalServerError), ("503", openai.InternalServerError)):
            runs = tmp_path / f"runs-{code}"
            with pytest.raises(error) as failed:
                retrying.chat.completions.create(model=MODEL, messages=[user(f"fail:{code}:{runs}")])
            assert failed.value.response.headers["x-should-retry"] == "false"
            assert runs.read_text() == "ran\n", f"{code}: the agent ran more than once"
        runs = tmp_path / "runs-429"
        with pytest.raises(openai.RateLimitError):
            retrying.chat.completions.create(model=MODEL, messages=[user(f"fail:429:{runs}")])
        assert runs.read_text() == "ran\n"


def test_a_lone_surrogate_in_the_answer_is_replaced_not_a_500(server):
    started = len(server.log())
    body = {"model": MODEL, "messages": [user("say:hi \ud800")]}
    whole = post(server, COMPLETIONS, body, key=KEY)
    assert whole.status_code == 200 and whole.json()["choices"][0]["message"]["content"] == "hi ?"
    streamed = post(server, COMPLETIONS, {**body, "stream": True}, key=KEY)
    chunks = [json.loads(p) for p in data_lines(streamed.text)[:-1]]
    assert "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks) == "hi ?"
    failed = post(server, COMPLETIONS, {"model": MODEL, "messages": [user("fail:502::bad \ud800")]}, key=KEY)
    assert failed.status_code == 502 and failed.json()["error"]["message"] == "bad ?"
    assert "Traceback" not in server.log()[started:]


def test_what_an_answer_keeps_is_bounded(server):
    # Not streamed, the whole answer is kept: past the bound, the run ends with an error naming it.
    too_long = post(
        server, COMPLETIONS, {"model": MODEL, "messages": [user(f"big:FINAL_RESPONSE:{MAX_KEPT_CHARS + 1}")]}, key=KEY
    )
    assert too_long.status_code == 500 and too_long.headers["x-should-retry"] == "false"
    assert f"{MAX_KEPT_CHARS:,} characters" in too_long.json()["error"]["message"]
    # Streamed, text other than FINAL_RESPONSE is held in case it is the answer: bounded too.
    held = post(
        server,
        COMPLETIONS,
        {"model": MODEL, "messages": [user(f"big:PLAN:{MAX_KEPT_CHARS + 1}")], "stream": True},
        key=KEY,
    )
    objects = [json.loads(p) for p in data_lines(held.text)[:-1]]
    content = "".join(o["choices"][0]["delta"].get("content") or "" for o in objects if "choices" in o)
    errors = [o["error"] for o in objects if "error" in o]
    assert len(content) == MAX_KEPT_CHARS - MAX_KEPT_CHARS % 65_536 and len(errors) == 1
    assert f"{MAX_KEPT_CHARS:,} characters" in errors[0]["message"]
    # ... and dropped once a FINAL_RESPONSE says what the answer is.
    answered = post(
        server, COMPLETIONS, {"model": MODEL, "messages": [user(f"big:PLAN:{MAX_KEPT_CHARS + 1}:final")]}, key=KEY
    )
    assert answered.json()["choices"][0]["message"]["content"] == "the short answer"


def test_no_request_leaves_a_traceback_in_the_log_but_a_failing_agent(server, client):
    started = len(server.log())
    with pytest.raises(openai.InternalServerError):
        client.chat.completions.create(model=MODEL, messages=[user("raise")])
    for bad in (b"\xff", b"[" * 5000, json.dumps({"model": MODEL, "messages": [user("say:\ud800")]}).encode()):
        post(server, COMPLETIONS, bad, key=KEY)
    httpx.get(server.url + "/v1/embeddings")
    log = server.log()[started:]
    assert "Exception in ASGI application" not in log
    assert log.count(f"agent {MODEL} raised RuntimeError") == 1
    assert log.count("Traceback") == 1  # the `raise` run's, logged as it should be


def test_both_faces_share_one_stream_budget(serve, tmp_path):
    server = serve({**AGENT, "ASSIST_MAX_STREAMS": "1"})
    with client_of(server) as client:
        with httpx.Client(base_url=server.url, timeout=15) as http:
            with http.stream("POST", "/assist", json=new_body(f"hang:{tmp_path / 'a'}")) as assist:
                events = iter_events(assist)  # kept: a generator dropped closes the response
                next(events)  # the /assist stream is open: the one place is taken
                with pytest.raises(openai.InternalServerError) as refused:
                    client.chat.completions.create(model=MODEL, messages=[user("think")])
                assert refused.value.status_code == 503 and refused.value.response.headers["retry-after"] == "1"
                assert refused.value.body["type"] == "server_error"
                assert "x-should-retry" not in refused.value.response.headers  # no agent ran: a retry may
            assert wait_for_file(tmp_path / "a", timeout=3) is not None  # that stream has ended
            assert wait_until(lambda: server.metric("assist_streams_open") == 0, 5)  # and its place is free
            stream = client.chat.completions.create(model=MODEL, messages=[user(f"hang:{tmp_path / 'b'}")], stream=True)
            chunks = iter(stream)
            next(chunks)
            refused_assist = http.post("/assist", json=new_body("think"))
            assert refused_assist.status_code == 503, refused_assist.text
            stream.close()
    assert wait_until(lambda: server.metric("assist_streams_open") == 0, 5)  # free for the next test on this server


def test_a_stream_open_at_shutdown_ends_with_a_503_error_and_done():
    with running_server({**AGENT, "ASSIST_SHUTDOWN_GRACE": "0.5"}) as server:
        body = {"model": MODEL, "messages": [user("hang:/dev/null")], "stream": True}
        with httpx.stream("POST", server.url + "/v1/chat/completions", json=body, timeout=15) as response:
            lines = response.iter_lines()
            assert next(lines).startswith("data: ")  # the role chunk: the run has started
            server.process.send_signal(signal.SIGTERM)
            rest = "\n".join(lines)
        payloads = data_lines(rest)
        errors = [json.loads(p)["error"] for p in payloads if p.startswith('{"error"')]
        assert [(e["code"], e["type"]) for e in errors] == [("503", "server_error")]
        assert payloads[-1] == "[DONE]"
        assert server.process.wait(timeout=15) in (0, -signal.SIGTERM)


@pytest.mark.parametrize("factory", ["user_app", "user_app_without_the_face"])
def test_add_routes_brings_the_face_only_when_given_its_prefix(factory):
    command = [sys.executable, "-m", "uvicorn", "--factory", f"tests.server.openai_agents:{factory}"]
    with running_server({"ASSIST_LOG_LEVEL": "warning"}, command=command) as app:
        with openai.OpenAI(base_url=app.url + "/bots/chat/v1", api_key="unused", max_retries=0) as client:
            if factory == "user_app":
                completion = client.chat.completions.create(model=MODEL, messages=[user("think")])
                assert completion.choices[0].message.content == "Forty-two."
                assert httpx.get(app.url + "/v1/models").json() == {"owner": "the user's app"}
                # The face's 404 for other paths under its prefix gives way to the app's own routes.
                assert httpx.get(app.url + "/bots/chat/v1/status").json() == {"owner": "the user's app"}
                with pytest.raises(openai.NotFoundError) as refused:
                    client.embeddings.create(model=MODEL, input="text")
                assert refused.value.code == "unknown_url"
            else:
                with pytest.raises(openai.NotFoundError):
                    client.models.list()
