"""Bad input, tried for real: random bodies, content types and headers against a real uvicorn.

Whatever comes in, the answer is one of the statuses the service means to give (never a
500, never a hang); a 4xx carries JSON with a `detail`; a 200 is a well-formed stream that
ends in exactly one `done`. Valid but odd bodies stream normally. Afterwards the server
still serves and has logged no traceback.

Valid bodies use the ScriptedAgent's `session` prompt: the agent answers at once with what
it was given and logs nothing, so any traceback in the server's log is the service's own.
"""

from __future__ import annotations

import json
import re
import socket
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st
from ulid import ULID

# These validate every event with the 0.3.0 reference models (and skip without them, as
# README's test setup installs them).
from tests.server.test_stream_guarantees import assert_streams_completed, assert_well_ended
from tests.support.request import posting
from tests.support.server import ALL_FACES, RunningServer
from tests.support.sse import Stream, parse_block, read_response, read_stream
from tests.support.waiting import wait_until

try:
    import schemathesis
except ImportError:  # the schema test below skips itself; the rest of the module runs
    schemathesis = None

MAX_BODY = 65_536
ENV = {
    "ASSIST_AGENT": "tests.support.agents:ScriptedAgent",
    "ASSIST_MAX_BODY_BYTES": str(MAX_BODY),
    "ASSIST_REQUEST_TIMEOUT": "5",
    "ASSIST_LOG_LEVEL": "warning",
    **ALL_FACES,  # the schema fuzzed is every face's
}
API_KEYS = ("fuzz-key-1", "second.key~2")

# What the service may answer to anything; 415 is allowed though the service answers a
# body that is not JSON with 422 (FastAPI's choice, and the README's).
ALLOWED = {200, 400, 401, 413, 415, 422}
CLIENT_TIMEOUT = 10.0  # seconds without a byte before httpx gives up: a hang fails the test
HANG_SECONDS = 30.0  # a response still trickling (pings) after this long is a hang too
MAX_ANSWER_BYTES = 1 << 20  # the `session` answer is small; a runaway stream fails the test

GOOD_ID = "01JDQ4Z8M7T3V5X9A2B4C6D8EF"
CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
ULID_RE = re.compile("^[0-7][0-9A-HJKMNP-TV-Za-hjkmnp-tv-z]{25}$")
SAFE_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:\-]{1,128}$")
# The empty prompt is valid, but the ScriptedAgent has no behaviour "" and raises: that
# one request's traceback is expected in the log (see the last test).
EMPTY_PROMPT_REQUEST_ID = "fuzz-empty-prompt"

FUZZ = settings(
    deadline=None,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
)


# --- servers and a bounded client ---------------------------------------------------------


@pytest.fixture(scope="module")
def fuzz_server(serve):
    return serve(ENV)


@pytest.fixture(scope="module")
def keyed_server(serve):
    """The same service with ASSIST_API_KEYS set, for the auth middleware."""
    return serve({**ENV, "ASSIST_API_KEYS": ",".join(API_KEYS)})


@pytest.fixture(scope="module", autouse=True)
def afterwards_the_servers_still_serve_and_logged_no_traceback(fuzz_server, keyed_server):
    """Once every test of the module has run, in whatever order: see `check_afterwards`."""
    yield
    check_afterwards(fuzz_server, keyed_server)


@pytest.fixture(scope="module")
def client(fuzz_server):
    with httpx.Client(base_url=fuzz_server.url, timeout=CLIENT_TIMEOUT) as http:
        yield http


@pytest.fixture(scope="module")
def keyed_client(keyed_server):
    with httpx.Client(base_url=keyed_server.url, timeout=CLIENT_TIMEOUT) as http:
        yield http


def post(http: httpx.Client, content: bytes | Iterator[bytes], headers: dict | None = None) -> Stream:
    """POST to /assist and read the whole answer, bounded in bytes and time; 200s parsed strictly."""
    deadline = time.monotonic() + HANG_SECONDS
    with posting(http, "/assist", content, headers=headers, content_type=None) as response:  # the headers as given
        return read_response(response, max_bytes=MAX_ANSWER_BYTES, deadline=deadline)


def assert_answered_properly(stream: Stream) -> None:
    """An allowed status; a 200 is a well-ended stream; a 4xx is JSON with a `detail`."""
    assert stream.status in ALLOWED, f"status {stream.status}: {stream.raw[:500]!r}"
    assert stream.headers.get("x-request-id"), "every answer carries its request id"
    if stream.status == 200:
        assert_well_ended(stream)
        assert_streams_completed(stream)
        return
    assert stream.headers["content-type"].startswith("application/json"), stream.headers
    detail = json.loads(stream.raw)["detail"]
    if stream.status == 422:
        assert isinstance(detail, list) and detail, detail
        for item in detail:
            assert item["loc"][0] == "body" and item["msg"] and item["type"], item
    else:
        assert isinstance(detail, str) and detail, detail


def session_answer(stream: Stream) -> dict[str, Any]:
    assert stream.names() == ["SESSION", "done"], stream.names()
    return stream.events[0]["content"]


def json_bytes(value: Any, ensure_ascii: bool = True) -> bytes:
    try:
        return json.dumps(value, ensure_ascii=ensure_ascii).encode()
    except UnicodeEncodeError:  # a lone surrogate: only its \u escape is valid UTF-8
        return json.dumps(value, ensure_ascii=True).encode()


JSON_HEADERS = {"Content-Type": "application/json"}


# --- strategies --------------------------------------------------------------------------

# Text the `session` agent echoes back (processor_id, past prompts). No lone surrogates:
# in processor_id one hangs the stream (test_a_lone_surrogate_in_processor_id_..., below);
# in a past prompt it makes the scripted agent's answer unencodable, so the *agent* fails.
echoed_text = st.text(st.characters(exclude_categories=["Cs"]), max_size=30)
# Text nobody echoes: anything a JSON string can hold, lone surrogates included.
any_text = st.text(st.one_of(st.characters(), st.characters(categories=["Cs"])), max_size=30)

json_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False), any_text
)
json_values = st.recursive(
    json_scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(any_text, children, max_size=4),
    max_leaves=20,
)
# NaN and Infinity too: Python's json module reads them, so the service must cope.
loose_json_values = st.recursive(
    st.one_of(json_scalars, st.floats()),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(any_text, children, max_size=4),
    max_leaves=20,
)


@st.composite
def ulids(draw) -> str:
    first = draw(st.sampled_from("01234567"))
    rest = draw(st.text(alphabet=CROCKFORD, min_size=25, max_size=25))
    return first + rest


@st.composite
def bad_ulids(draw) -> str:
    """Strings that look a bit like ULIDs and are not: wrong length, alphabet or range."""
    kind = draw(st.sampled_from(["short", "long", "alphabet", "overflow", "padded"]))
    good = draw(ulids())
    if kind == "short":
        value = good[: draw(st.integers(0, 25))]
    elif kind == "long":
        value = good + draw(st.text(alphabet=CROCKFORD, min_size=1, max_size=10))
    elif kind == "alphabet":  # I L O U, lowercase i l o u, punctuation, non-ASCII
        position = draw(st.integers(0, 25))
        bad = draw(st.sampled_from(list("ILOUilou-_ /+=é٣\u00a0\x00")))
        value = good[:position] + bad + good[position + 1 :]
    elif kind == "overflow":  # 26 valid characters, but past 2**128
        value = draw(st.sampled_from("89ABCDEFGHJKMNPQRSTVWXYZ")) + good[1:]
    else:
        value = " " + good
    assert not ULID_RE.match(value), value
    return value


def maybe(strategy) -> st.SearchStrategy:
    return st.one_of(st.none(), strategy)


@st.composite
def assist_requests(draw) -> dict[str, Any]:
    """A past user request; ids obey the rules (root <= parent < id) when parent is given."""
    parts = draw(
        st.lists(
            st.fixed_dictionaries(
                {"prompt": echoed_text},
                optional={"fileIds": st.lists(any_text, max_size=3), "files_ids": st.lists(any_text, max_size=3)},
            ).map(lambda part: {k: v for k, v in part.items() if not ("fileIds" in part and k == "files_ids")}),
            max_size=3,
        )
    )
    request: dict[str, Any] = {
        draw(st.sampled_from(["chatId", "chat_id"])): draw(ulids()),
        "content": {"request_payload": {"parts": parts}},
    }
    if draw(st.booleans()):
        request["content"]["capability"] = draw(st.sampled_from(["assist", "other"]))
    shape = draw(st.sampled_from(["no-id", "id", "parent", "nulls"]))
    if shape != "no-id":
        root, parent, own = sorted(draw(st.lists(ulids(), min_size=3, max_size=3, unique=True)))
        request["id"] = own
        if shape == "parent":
            request["parent_request_id"], request["root_request_id"] = parent, root
        elif shape == "nulls":
            request["parent_request_id"] = None
            request["root_request_id"] = draw(st.sampled_from([None, own]))
    return request


metadata = maybe(
    st.dictionaries(
        any_text,
        st.one_of(
            any_text,
            st.integers(),
            st.floats(allow_nan=False, allow_infinity=False),
            st.booleans(),
            st.lists(any_text, max_size=3),
        ),
        max_size=16,
    )
)


@st.composite
def response_events(draw) -> dict[str, Any]:
    kind = draw(st.sampled_from(["atomic.textblock", "atomic.json", "chunked.text", "atomic.error", "atomic.done"]))
    event: dict[str, Any] = {"content_type": kind, "source": draw(any_text)}
    if kind == "atomic.textblock":
        event.update(event_name=draw(any_text), content=draw(any_text))
    elif kind == "atomic.json":
        event.update(event_name=draw(any_text), content=draw(st.dictionaries(any_text, json_values, max_size=4)))
    elif kind == "chunked.text":
        event.update(
            event_name=draw(any_text), stream_id=draw(any_text), is_complete=draw(st.booleans()), content=draw(any_text)
        )
    elif kind == "atomic.error":
        content = {"error_message": draw(any_text)}
        if draw(st.booleans()):
            content["error_code"] = draw(st.integers())
        if draw(st.booleans()):
            content["details"] = draw(maybe(st.dictionaries(any_text, json_values, max_size=3)))
        event["content"] = content
    optional = draw(
        st.fixed_dictionaries(
            {},
            optional={
                "id": maybe(ulids()),  # an event without an id gets a fresh one, as in 0.3.0
                "metadata": metadata,
                "schema_version": any_text,
            },
        )
    )
    event.update(optional)
    return event


def interaction_message(event_strategy) -> st.SearchStrategy:
    return st.fixed_dictionaries(
        {"event": event_strategy},
        optional={"sender": maybe(any_text), "recipients": maybe(st.lists(any_text, max_size=3))},
    )


interactions = st.fixed_dictionaries(
    {"request": interaction_message(assist_requests())},
    optional={"responses": st.lists(interaction_message(response_events()), max_size=3)},
)


@st.composite
def valid_bodies(draw, max_interactions: int = 3) -> dict[str, Any]:
    """A valid request whose prompt makes the agent echo its session: `session` or `session:<text>`."""
    # The agent ignores what follows `session:`, so that text may be anything.
    prompt = draw(st.one_of(st.just("session"), any_text.map(lambda text: "session:" + text)))
    case = st.sampled_from([str.upper, str.lower])  # the service reads ULIDs in either case
    body: dict[str, Any] = {"query": {"id": draw(case)(draw(ulids())), "prompt": prompt}}
    shape = draw(st.sampled_from(["session", "session", "null", "missing"]))
    if shape == "null":
        body["session"] = None
    elif shape == "session":
        body["session"] = {
            "processor_id": draw(echoed_text),
            "activity_id": draw(case)(draw(ulids())),
            "request_id": draw(case)(draw(ulids())),
        }
        if draw(st.booleans()):
            body["session"]["interactions"] = draw(st.lists(interactions, max_size=max_interactions))
    return body


def expected_session(body: dict[str, Any]) -> dict[str, Any]:
    """What the `session` agent must answer for a valid body."""
    session = body.get("session")
    if session is None:
        return {"processor_id": "scripted", "interactions": 0, "prompts": []}
    past = session.get("interactions", [])
    return {
        "processor_id": session["processor_id"],
        "activity_id": session["activity_id"].upper(),
        "request_id": session["request_id"].upper(),
        "interactions": len(past),
        "prompts": [
            "\n".join(p["prompt"] for p in i["request"]["event"]["content"]["request_payload"]["parts"]) for i in past
        ],
    }


# --- random bytes and random JSON -------------------------------------------------------


@settings(FUZZ, max_examples=30)
@given(body=st.binary(max_size=4096))
@example(body=b"")
@example(body=b"\xff\xfe{\x00")
@example(body=b'{"query": {"id": "' + GOOD_ID.encode() + b'", "prompt": "\xc3"}}')  # not UTF-8
@example(body=b'{"query": {"id": ' + b"9" * 5000 + b', "prompt": "session"}}')  # past Python's int limit
def test_random_bytes_are_refused_with_a_clear_4xx(client, body):
    stream = post(client, body, JSON_HEADERS)
    assert_answered_properly(stream)
    # Not JSON (422 from the service) or not UTF-8 (400 from FastAPI): never a stream.
    assert stream.status in (400, 422)


@settings(FUZZ, max_examples=30)
@given(value=loose_json_values, ensure_ascii=st.booleans())
@example(value=[], ensure_ascii=True)
@example(value={"query": None}, ensure_ascii=True)
@example(value={"query": {"id": float("nan"), "prompt": "session"}}, ensure_ascii=True)
def test_random_json_values_are_refused_with_a_422_naming_the_body(client, value, ensure_ascii):
    body = json_bytes(value, ensure_ascii)
    stream = post(client, body, JSON_HEADERS)
    assert_answered_properly(stream)
    assert stream.status == 422


# --- nearly valid bodies: one thing wrong -----------------------------------------------


def walk(value: Any, path: tuple = ()) -> Iterator[tuple]:
    yield path
    if isinstance(value, dict):
        for key, child in value.items():
            yield from walk(child, (*path, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield from walk(child, (*path, index))


def at(value: Any, path: tuple) -> Any:
    for step in path:
        value = value[step]
    return value


def is_subsequence(needle: tuple, haystack: list) -> bool:
    remaining = iter(haystack)
    return all(any(step == item for item in remaining) for step in needle)


def wrong_values_for(original: Any) -> st.SearchStrategy:
    """A JSON value of another type than `original`'s (so a string field never gets a string)."""
    kinds = [
        st.none(),
        st.booleans(),
        st.integers(),
        st.floats(allow_nan=False, allow_infinity=False),
        any_text,
        st.lists(json_scalars, max_size=3),
        st.dictionaries(any_text, json_scalars, max_size=3),
    ]
    samples = [None, True, 1, 1.5, "", [], {}]
    return st.one_of([kind for kind, sample in zip(kinds, samples, strict=False) if type(sample) is not type(original)])


# Fields whose absence, or a value of another type, must be a 422 naming exactly that field.
REQUIRED = {
    ("query",),
    ("query", "id"),
    ("query", "prompt"),
    ("session", "processor_id"),
    ("session", "activity_id"),
    ("session", "request_id"),
}


@settings(FUZZ, max_examples=60)
@given(body=valid_bodies(), kind=st.sampled_from(["wrong_type", "delete", "bad_ulid", "extra"]), data=st.data())
def test_a_nearly_valid_body_is_refused_or_served_never_broken(client, body, kind, data):
    applies = {
        "wrong_type": lambda path: bool(path),
        "delete": lambda path: bool(path) and isinstance(at(body, path[:-1]), dict),
        "bad_ulid": lambda path: isinstance(at(body, path), str) and bool(ULID_RE.match(at(body, path))),
        "extra": lambda path: isinstance(at(body, path), dict),
    }
    path = data.draw(st.sampled_from([p for p in walk(body) if applies[kind](p)]), label="path")
    value = at(body, path)
    parent = at(body, path[:-1]) if path else None
    if kind == "delete":
        del parent[path[-1]]
    elif kind == "wrong_type":
        parent[path[-1]] = data.draw(wrong_values_for(value), label="wrong value")
    elif kind == "bad_ulid":
        parent[path[-1]] = data.draw(bad_ulids(), label="bad ulid")
    else:
        key = data.draw(any_text.filter(lambda k: k not in value), label="extra key")
        value[key] = data.draw(json_values, label="extra value")

    stream = post(client, json_bytes(body), JSON_HEADERS)
    event(f"{kind} -> {stream.status}")  # shown by --hypothesis-show-statistics
    assert_answered_properly(stream)
    locs = [item["loc"] for item in json.loads(stream.raw)["detail"]] if stream.status == 422 else []
    if kind == "bad_ulid":
        assert stream.status == 422
        assert any(loc[-1] == path[-1] and is_subsequence(path, loc[1:]) for loc in locs), locs
    elif (kind == "delete" and path in REQUIRED) or (kind == "wrong_type" and path in REQUIRED):
        assert stream.status == 422
        assert ["body", *path] in locs, locs


# --- valid but odd bodies ----------------------------------------------------------------


@settings(FUZZ, max_examples=40)
@given(body=valid_bodies(), copies=st.integers(0, 400), ensure_ascii=st.booleans())
def test_a_valid_but_odd_body_streams_and_the_agent_sees_it_exactly(client, body, copies, ensure_ascii):
    session = body.get("session")
    if session is not None and session.get("interactions") and copies:
        # Many interactions: repeat the drawn ones, as many as fit under the body limit.
        drawn = session["interactions"]
        session["interactions"] = [drawn[i % len(drawn)] for i in range(copies)]
        while len(json_bytes(body, ensure_ascii)) > MAX_BODY:
            del session["interactions"][len(session["interactions"]) // 2 :]
    content = json_bytes(body, ensure_ascii)
    assert len(content) <= MAX_BODY
    stream = post(client, content, JSON_HEADERS)
    assert_answered_properly(stream)
    assert stream.status == 200
    answer = session_answer(stream)
    expected = expected_session(body)
    assert {key: answer[key] for key in expected} == expected
    assert {e["source"] for e in stream.events} == {expected["processor_id"]}


def test_an_empty_prompt_is_a_valid_request(client):
    """The service streams it; the scripted agent knows no behaviour "" and fails as an agent does."""
    body = json_bytes({"query": {"id": GOOD_ID, "prompt": ""}})
    stream = post(client, body, {**JSON_HEADERS, "X-Request-ID": EMPTY_PROMPT_REQUEST_ID})
    assert_answered_properly(stream)
    assert stream.names() == ["error", "done"]
    assert stream.events[0]["content"]["details"] == {
        "error_type": "AttributeError",
        "request_id": EMPTY_PROMPT_REQUEST_ID,
    }


# --- sizes around the body limit ---------------------------------------------------------


def body_of_exactly(size: int, filler: str) -> bytes:
    head = b'{"query": {"id": "' + GOOD_ID.encode() + b'", "prompt": "session:'
    tail = b'"}}'
    room = size - len(head) - len(tail)
    unit = filler.encode()
    body = head + unit * (room // len(unit)) + b"x" * (room % len(unit)) + tail
    assert len(body) == size
    return body


@settings(FUZZ, max_examples=30)
@given(
    size=st.one_of(st.integers(MAX_BODY - 300, MAX_BODY + 300), st.integers(MAX_BODY + 300, 3 * MAX_BODY)),
    filler=st.sampled_from(["x", "é", "✓", "😀"]),
    chunked=st.booleans(),
)
@example(size=MAX_BODY, filler="x", chunked=False)
@example(size=MAX_BODY + 1, filler="x", chunked=False)
@example(size=MAX_BODY, filler="😀", chunked=True)
@example(size=MAX_BODY + 1, filler="😀", chunked=True)
def test_a_body_is_served_up_to_the_limit_and_413_past_it(client, size, filler, chunked):
    body = body_of_exactly(size, filler)
    # A generator makes httpx send it chunked, with no Content-Length: counted as it arrives.
    content = (body[i : i + 7919] for i in range(0, len(body), 7919)) if chunked else body
    stream = post(client, content, JSON_HEADERS)
    assert_answered_properly(stream)
    if size <= MAX_BODY:
        assert stream.status == 200
        session_answer(stream)
    else:
        assert stream.status == 413
        assert str(MAX_BODY) in json.loads(stream.raw)["detail"]


def test_a_declared_oversize_body_is_refused_before_it_is_sent(fuzz_server):
    """Content-Length alone decides: the 413 comes back without a byte of the body sent."""
    address = urlsplit(fuzz_server.url)
    with socket.create_connection((address.hostname, address.port), timeout=CLIENT_TIMEOUT) as sock:
        sock.sendall(
            b"POST /assist HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
            b"Content-Length: 1000000000\r\n\r\n"
        )
        answer = b""
        while b"\r\n\r\n" not in answer or not answer.rstrip().endswith(b"}"):
            chunk = sock.recv(65536)
            if not chunk:
                break
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 413 "), answer
    assert b"content-type: application/json" in head.lower()
    assert json.loads(body)["detail"]


# --- deep nesting ------------------------------------------------------------------------


def nested(opener: str, depth: int, closed: bool = True) -> str:
    if opener == "[":
        return "[" * depth + ("]" * depth if closed else "")
    return '{"a":' * depth + "1" + ("}" * depth if closed else "")


def nested_body(where: str, opener: str, depth: int) -> bytes:
    """Built as text: json.dumps would hit RecursionError here, in the test."""
    query = '{"id": "' + GOOD_ID + '", "prompt": "session"}'
    if where == "whole":
        text = nested(opener, depth)
    elif where == "extra":
        text = '{"query": ' + query + ', "deep": ' + nested(opener, depth) + "}"
    elif where == "unclosed":
        text = '{"query": ' + query + ', "deep": ' + nested(opener, depth, closed=False)
    elif where == "prompt":
        text = '{"query": {"id": "' + GOOD_ID + '", "prompt": ' + nested(opener, depth) + "}}"
    else:  # inside a past JSON event's content, which holds any JSON
        event = (
            '{"content_type": "atomic.json", "event_name": "DEEP", "source": "s", "content": {"deep": '
            + nested(opener, depth)
            + "}}"
        )
        request = '{"chatId": "' + GOOD_ID + '", "content": {"request_payload": {"parts": []}}}'
        session = (
            '{"processor_id": "p", "activity_id": "'
            + GOOD_ID
            + '", "request_id": "'
            + GOOD_ID
            + '", "interactions": [{"request": {"event": '
            + request
            + '}, "responses": [{"event": '
            + event
            + "}]}]}"
        )
        text = '{"query": ' + query + ', "session": ' + session + "}"
    return text.encode()


# Which statuses each placement may get: 400 where Python's json gives up (RecursionError),
# 422 where the nesting stands in for a field, 200 where the service ignores or keeps it.
NESTING_OUTCOMES = {
    "whole": {400, 422},
    "extra": {200, 400},
    "unclosed": {400, 422},
    "prompt": {400, 422},
    "document": {200, 400},
}


@settings(FUZZ, max_examples=25)
@given(
    where=st.sampled_from(sorted(NESTING_OUTCOMES)),
    opener=st.sampled_from(["[", "{"]),
    depth=st.one_of(st.integers(1, 10_000), st.integers(900, 1100)),
)
@example(where="whole", opener="[", depth=10_000)
@example(where="extra", opener="[", depth=10_000)
@example(where="extra", opener="{", depth=10_000)
@example(where="document", opener="[", depth=10_000)
@example(where="document", opener="{", depth=900)
@example(where="unclosed", opener="[", depth=10_000)
def test_deeply_nested_json_is_refused_or_served_never_a_500(client, where, opener, depth):
    body = nested_body(where, opener, depth)
    assert len(body) <= MAX_BODY
    stream = post(client, body, JSON_HEADERS)
    event(f"{where} -> {stream.status}")
    assert_answered_properly(stream)
    assert stream.status in NESTING_OUTCOMES[where]
    if stream.status == 200:
        session_answer(stream)


# --- content types -----------------------------------------------------------------------

# Content types whose answer is certain: JSON (by FastAPI's rule: application/json or
# application/*+json, any case, any parameters) streams; anything else is a 415 that says how to send.
KNOWN_CONTENT_TYPES = {
    None: 415,
    "": 415,
    "text/plain": 415,
    "text/json": 415,
    "application/xml": 415,
    "application/x-www-form-urlencoded": 415,
    "multipart/form-data; boundary=xyz": 415,
    ";;;": 415,
    "application/": 415,
    "/json": 415,
    "application/json": 200,
    "application/json; charset=utf-8": 200,
    "APPLICATION/JSON": 200,
    "application/vnd.api+json": 200,
    "application/json; charset=latin-1": 200,
}
# Header bytes HTTP allows (visible ASCII, space, obs-text 0x80-0xFF), without the outer
# spaces h11 refuses to send.
latin1_header_values = st.lists(
    st.one_of(st.integers(0x21, 0x7E), st.integers(0x80, 0xFF), st.just(0x20)), max_size=200
).map(lambda value: bytes(value).strip(b" "))


@settings(FUZZ, max_examples=25)
@given(content_type=st.one_of(st.sampled_from(list(KNOWN_CONTENT_TYPES)), latin1_header_values))
def test_any_content_type_gets_a_stream_or_a_415(client, content_type):
    body = json_bytes({"query": {"id": GOOD_ID, "prompt": "session"}})
    headers = {} if content_type is None else {"Content-Type": content_type}
    stream = post(client, body, headers)
    assert_answered_properly(stream)
    assert stream.status in (200, 415)
    if not isinstance(content_type, bytes):
        assert stream.status == KNOWN_CONTENT_TYPES[content_type]
    if stream.status == 415:
        assert "Content-Type: application/json" in json.loads(stream.raw)["detail"]


# --- odd headers -------------------------------------------------------------------------

header_names = (
    st.text(alphabet="abcdefghijklmnopqrstuvwxyz-0123456789", min_size=1, max_size=20)
    .map(lambda name: "X-" + name)
    .filter(lambda name: name.lower() != "x-request-id")
)
request_ids = st.one_of(
    st.text(alphabet="ABCxyz0123456789._:-", min_size=1, max_size=128),  # echoed as is
    st.text(alphabet="ABCxyz0123456789._:-", min_size=129, max_size=400),  # too long: replaced
    latin1_header_values,  # odd bytes: replaced
)


@settings(FUZZ, max_examples=30)
@given(
    request_id=maybe(request_ids),
    authorization=maybe(
        st.one_of(latin1_header_values, latin1_header_values.map(lambda v: (b"Bearer " + v).strip(b" ")))
    ),
    extra=st.dictionaries(
        header_names, st.one_of(latin1_header_values, st.integers(1000, 8000).map(lambda n: b"v" * n)), max_size=4
    ),
)
# The longest block within ASSIST_MAX_HEADER_BYTES (64 KiB); past it is a 431, in one read or many.
@example(request_id="a" * 129, authorization=b"Bearer " + b"k" * 8000, extra={"X-Long": b"y" * 56_000})
def test_odd_headers_do_not_disturb_a_valid_request(client, request_id, authorization, extra):
    headers: dict[str, Any] = {**extra, **JSON_HEADERS}
    if request_id is not None:
        headers["X-Request-ID"] = request_id
    if authorization is not None:  # no ASSIST_API_KEYS on this server: ignored
        headers["Authorization"] = authorization
    stream = post(client, json_bytes({"query": {"id": GOOD_ID, "prompt": "session"}}), headers)
    assert_answered_properly(stream)
    assert stream.status == 200
    session_answer(stream)
    echoed = stream.headers["x-request-id"]
    sent = request_id.decode("latin-1") if isinstance(request_id, bytes) else request_id
    if sent is not None and SAFE_REQUEST_ID.match(sent):
        assert echoed == sent
    else:
        assert ULID_RE.match(echoed), echoed  # a fresh id, never the odd value


def bearer_token(value: bytes | None) -> bytes | None:
    """The token of `Authorization: Bearer <token>` (scheme in any case), else None."""
    if value is None:
        return None
    match = re.fullmatch(rb"(?i:bearer) +(.*?)[ \t]*", value)
    return match.group(1) if match and match.group(1) else None


@settings(FUZZ, max_examples=25)
@given(
    authorization=maybe(
        st.one_of(
            latin1_header_values,
            latin1_header_values.map(lambda v: (b"Bearer " + v).strip(b" ")),
            st.tuples(
                st.sampled_from([b"Bearer", b"bearer", b"BEARER", b"Basic", b"Token"]),
                st.sampled_from([b" ", b"  "]),
                st.sampled_from([key.encode() for key in API_KEYS] + [b"fuzz-key-", b"FUZZ-KEY-1", b"fuzz-key-1x"]),
            ).map(b"".join),
        )
    )
)
def test_only_a_valid_bearer_key_passes_and_anything_else_is_a_401(keyed_client, authorization):
    headers = dict(JSON_HEADERS)
    if authorization is not None:
        headers["Authorization"] = authorization
    stream = post(keyed_client, json_bytes({"query": {"id": GOOD_ID, "prompt": "session"}}), headers)
    assert_answered_properly(stream)
    if bearer_token(authorization) in {key.encode() for key in API_KEYS}:
        assert stream.status == 200
        session_answer(stream)
    else:
        assert stream.status == 401
        assert stream.headers["www-authenticate"].startswith("Bearer")


# --- the OpenAPI schema, with schemathesis -----------------------------------------------

if schemathesis is not None:

    @pytest.fixture(scope="module")
    def openapi_schema(fuzz_server):
        return schemathesis.openapi.from_url(fuzz_server.url + "/openapi.json")

    schema = schemathesis.pytest.from_fixture("openapi_schema")

    @schema.parametrize()
    @settings(
        max_examples=50,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )
    def test_the_service_keeps_to_its_openapi_schema(case):
        body = case.body
        if (
            isinstance(body, dict)
            and isinstance(body.get("query"), dict)
            and isinstance(body["query"].get("prompt"), str)
        ):
            # Keep the agent on its quiet behaviour; the generated text still travels.
            body["query"]["prompt"] = "session:" + body["query"]["prompt"]
        if case.operation.path == "/agui" and isinstance(body, dict) and isinstance(body.get("messages"), list):
            # The same for /agui, whose prompt is the last user message (a list of parts: made one).
            for message in body["messages"]:
                if isinstance(message, dict) and message.get("role") == "user":
                    text = message.get("content")
                    message["content"] = "session:" + (text if isinstance(text, str) else "")
        excluded = [
            # The request schema and the validator differ on purpose or by a gap JSON Schema
            # cannot close, so "schema-valid must be accepted" and "schema-invalid must be
            # refused" do not hold, and say nothing about robustness:
            # - refused though schema-valid: root <= parent < id (a model validator); at most
            #   16 metadata keys; a past event without `content_type` (it has a default in
            #   the schema, but the union needs it as its discriminator).
            # - accepted though schema-invalid: a past event's `id` may be null or missing
            #   (it gets a fresh one, as in the 0.3.0 package).
            schemathesis.checks.positive_data_acceptance,
            schemathesis.checks.negative_data_rejection,
        ]
        response = case.call_and_validate(timeout=CLIENT_TIMEOUT, excluded_checks=excluded)
        assert response.status_code < 500
        # The 200 of /assist is text/event-stream, with no schema to check it against: read it
        # as strictly as the hypothesis tests do (only POST: the 405 probes have nothing to read).
        if case.operation.path == "/assist" and case.method.upper() == "POST":
            assert response.content_size == len(response.content), "schemathesis kept part of the body"
            headers = httpx.Headers([(name, value) for name, values in response.headers.items() for value in values])
            stream = Stream(response.status_code, headers, raw=response.content)
            if response.status_code == 200:
                blocks = response.content.split(b"\n\n")
                assert blocks[-1] == b"", f"bytes after the last frame: {blocks[-1]!r}"
                for block in blocks[:-1]:
                    parse_block(block, time.time(), stream)
            assert_answered_properly(stream)

else:

    def test_the_service_keeps_to_its_openapi_schema():
        pytest.importorskip("schemathesis")


# --- afterwards --------------------------------------------------------------------------


def log_records(log: str) -> list[str]:
    """The log split into records: each starts with a timestamped line."""
    return re.split(r"\n(?=\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)", log)


def check_afterwards(fuzz_server: RunningServer, keyed_server: RunningServer) -> None:
    """After all that, the servers still serve, hold no stream, answered no 5xx, logged no traceback."""
    for server in (fuzz_server, keyed_server):
        assert server.process.poll() is None, "the server died"
        assert httpx.get(server.url + "/healthz", timeout=CLIENT_TIMEOUT).json() == {"status": "ok"}
    stream = read_stream(fuzz_server.url, {"query": {"id": str(ULID()), "prompt": "session"}}, timeout=CLIENT_TIMEOUT)
    assert_well_ended(stream)
    assert session_answer(stream)["processor_id"] == "scripted"
    keyed = read_stream(
        keyed_server.url,
        {"query": {"id": str(ULID()), "prompt": "session"}},
        timeout=CLIENT_TIMEOUT,
        headers={"Authorization": f"Bearer {API_KEYS[1]}"},
    )
    assert_well_ended(keyed)
    metrics = httpx.get(fuzz_server.url + "/metrics", timeout=CLIENT_TIMEOUT).text
    assert re.search(r"^assist_streams_open 0\.0$", metrics, re.M), "a stream is still counted as open"
    assert not re.search(r'^assist_http_requests_total\{status="5\d\d"\}', metrics, re.M), "a 5xx was answered"

    expected = f"(request {EMPTY_PROMPT_REQUEST_ID})"
    for server in (fuzz_server, keyed_server):
        unexpected = [
            r
            for r in log_records(server.log())
            if expected not in r and ("Traceback" in r or " ERROR " in r or " CRITICAL " in r)
        ]
        assert not unexpected, "\n".join(unexpected)[:5000]


# --- bugs the fuzzing found, kept fixed -----------------------------------------------------


@pytest.fixture(scope="module")
def known_bugs_server(serve):
    """Its own server, so that anything these provoke stays out of the fuzzed servers' logs."""
    return serve({**ENV, "ASSIST_PING_INTERVAL": "60"})


def test_a_lone_surrogate_in_processor_id_still_gets_an_answer(known_bugs_server):
    body = (
        b'{"query": {"id": "' + GOOD_ID.encode() + b'", "prompt": "session"}, "session": {"processor_id": '
        b'"\\ud800", "activity_id": "' + GOOD_ID.encode() + b'", "request_id": "' + GOOD_ID.encode() + b'"}}'
    )
    with httpx.Client(base_url=known_bugs_server.url, timeout=3.0) as http:
        stream = post(http, body, JSON_HEADERS)
    # Fixed, it is either refused (422) or answered with a well-ended stream.
    assert_answered_properly(stream)
    assert stream.status in (200, 422)


def test_a_client_that_leaves_mid_body_is_not_counted_as_a_500(known_bugs_server):
    def fives() -> float:
        text = httpx.get(known_bugs_server.url + "/metrics", timeout=CLIENT_TIMEOUT).text
        return sum(float(v) for v in re.findall(r'^assist_http_requests_total\{status="5\d\d"\} (\S+)$', text, re.M))

    before = fives()
    address = urlsplit(known_bugs_server.url)
    with socket.create_connection((address.hostname, address.port), timeout=CLIENT_TIMEOUT) as sock:
        sock.sendall(
            b"POST /assist HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
            b'Content-Length: 1000\r\n\r\n{"query"'
        )
        assert wait_until(lambda: known_bugs_server.metric("assist_streams_open") == 1, 5)  # in, its body coming
    # The request is over once its place is given back; whatever it was answered, not a 5xx.
    assert wait_until(lambda: known_bugs_server.metric("assist_streams_open") == 0, 5)
    assert fives() == before
