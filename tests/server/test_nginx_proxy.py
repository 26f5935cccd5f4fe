"""deploy/nginx, run for real: Debian's nginx, started from the shipped files, in front of two
`python -m app serve` processes on loopback. Only the upstream addresses, the listen ports and
the file paths of site-tls.conf are replaced; http.conf, proxy.conf and stream.conf run as shipped.

Checks: events pass through as they are made, a client leaving cancels the agent, a process
that gets SIGTERM drains while the other takes the new requests, requests spread over both,
and X-Request-ID is the same id at the client, in nginx's log and in the service's.
"""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import uvicorn
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from ulid import ULID

from sentient_assist import ResponseHandler
from sentient_assist.server.settings import Settings
from tests.server.test_stream_guarantees import assert_well_ended
from tests.support.agents import ScriptedAgent
from tests.support.files import wait_for_file
from tests.support.server import RunningServer, check_port_taken, free_port, on_a_free_port, running_server
from tests.support.sse import Event, Stream, iter_events, new_body, read_response
from tests.support.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "deploy" / "nginx"
NGINX = shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin:/usr/local/sbin")
UPSTREAM_NAME = "PROXY_TEST_UPSTREAM"  # each service process's name, which its agent reports

NO_NGINX = "nginx is not installed (not on PATH, nor in /usr/sbin): apt-get install -y nginx"
pytestmark = pytest.mark.timeout(60)


class ProxyAgent(ScriptedAgent):
    """The scripted agent, and `whoami[:seconds]`: names the process it runs in (a STATUS
    event), optionally holds the stream open that long, then answers."""

    async def _whoami(self, session, argument, handler: ResponseHandler) -> None:
        await handler.emit_text_block("STATUS", os.environ[UPSTREAM_NAME])
        if argument:
            await asyncio.sleep(float(argument))
        await handler.respond("FINAL", "done")


# --- The shipped configuration, on loopback -----------------------------------------------


def site_for_test(text: str, upstreams: list[str], http_port: int, https_port: int, tmp: Path) -> str:
    """site-tls.conf with loopback addresses, free ports and paths in `tmp`; nothing else."""
    substitutions = [
        (
            r"(?m)^    server 127\.0\.0\.1:8001;\n    server 127\.0\.0\.1:8002;\n",
            "".join(f"    server {u};\n" for u in upstreams),
        ),
        (r"(?m)^    listen \[::\]:\d+.*\n", ""),  # IPv6 may be off where the tests run
        (r"(?m)^    listen 80;", f"    listen 127.0.0.1:{http_port};"),
        (r"(?m)^    listen 443 ", f"    listen 127.0.0.1:{https_port} "),
        (r"/etc/ssl/assist/", f"{tmp}/"),
        (r"/var/log/nginx/", f"{tmp}/"),
    ]
    for pattern, replacement in substitutions:
        text, count = re.subn(pattern, replacement, text)
        assert count, f"site-tls.conf no longer has {pattern!r}: update this test with it"
    return text


def self_signed_certificate(directory: Path) -> Path:
    """fullchain.pem and privkey.pem for 127.0.0.1 in `directory`; returns the certificate."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    path = directory / "fullchain.pem"
    path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    (directory / "privkey.pem").write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return path


@dataclass
class Proxy:
    url: str  # https://127.0.0.1:port
    http_url: str  # the plain-HTTP server, which redirects
    certificate: Path
    access_log: Path
    error_log: Path
    upstreams: dict[str, RunningServer]  # by name

    def client(self, **kwargs) -> httpx.Client:
        trusted = ssl.create_default_context(cafile=self.certificate)
        return httpx.Client(base_url=self.url, verify=trusted, timeout=10, **kwargs)

    def access_lines(self) -> list[str]:
        return self.access_log.read_text().splitlines() if self.access_log.exists() else []


def prefix_directory(tmp: Path, upstreams: list[str], http_port: int, https_port: int) -> Path:
    """A prefix directory holding the shipped files and a main nginx.conf (the part a distro
    ships) that keeps every path in `tmp`, nginx listening on `http_port` and `https_port`."""
    shutil.copytree(SHIPPED, tmp / "assist", ignore=shutil.ignore_patterns("*.md"), dirs_exist_ok=True)
    site = tmp / "assist" / "site-tls.conf"
    site.write_text(site_for_test(site.read_text(), upstreams, http_port, https_port, tmp))
    self_signed_certificate(tmp)
    write_main_conf(tmp, "site-tls.conf")
    return tmp


def write_main_conf(tmp: Path, site: str) -> None:
    """tmp/nginx.conf: what a distro's nginx.conf holds, with every path in `tmp`, around `site`."""
    # Workers run as the user nginx starts as: a root run would otherwise switch them to
    # `nobody`, who cannot enter pytest's private temporary directories.
    user = "user root root;\n" if os.geteuid() == 0 else ""
    temp_paths = "".join(
        f"    {kind}_temp_path {tmp}/{kind};\n" for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    (tmp / "nginx.conf").write_text(
        f"{user}worker_processes 1;\npid {tmp}/nginx.pid;\nerror_log {tmp}/error.log info;\n"
        "events { worker_connections 256; }\n"
        f"http {{\n{temp_paths}    access_log off;\n    include assist/{site};\n}}\n"
    )


def wait_for_port(port: int, process: subprocess.Popen, error_log: Path, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            check_port_taken(error_log.read_text(errors="replace"))
            raise RuntimeError(f"nginx exited with {process.returncode}:\n{error_log.read_text(errors='replace')}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.02)
    raise RuntimeError(f"nginx not listening after {timeout}s:\n{error_log.read_text(errors='replace')}")


@contextmanager
def running_nginx(tmp: Path, upstreams: dict[str, RunningServer]) -> Iterator[Proxy]:
    """nginx in the foreground, a child of this process, with its own prefix in `tmp`, on two
    free ports (nginx cannot take a socket: others if it lost one)."""
    with on_a_free_port(lambda http_port: _running_nginx(tmp, upstreams, http_port, free_port())) as proxy:
        yield proxy


@contextmanager
def _running_nginx(tmp: Path, upstreams: dict[str, RunningServer], http_port: int, https_port: int) -> Iterator[Proxy]:
    addresses = [server.url.removeprefix("http://") for server in upstreams.values()]
    prefix = prefix_directory(tmp, addresses, http_port, https_port)
    assert NGINX is not None
    error_log = tmp / "error.log"
    error_log.unlink(missing_ok=True)  # a try before this one's
    checked = subprocess.run(
        [NGINX, "-t", "-p", str(prefix), "-c", str(prefix / "nginx.conf"), "-g", "daemon off;"],
        capture_output=True,
        text=True,
        timeout=10,
    )
    assert checked.returncode == 0, checked.stderr
    assert "[emerg]" not in checked.stderr
    process = subprocess.Popen(
        [NGINX, "-p", str(prefix), "-c", str(prefix / "nginx.conf"), "-g", "daemon off;"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(https_port, process, error_log)
        yield Proxy(
            url=f"https://127.0.0.1:{https_port}",
            http_url=f"http://127.0.0.1:{http_port}",
            certificate=prefix / "fullchain.pem",
            access_log=tmp / "assist.access.log",
            error_log=error_log,
            upstreams=upstreams,
        )
    finally:
        process.terminate()  # SIGTERM: nginx's fast shutdown
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextmanager
def proxied_pair(tmp: Path, per_upstream: dict[str, dict[str, str]] | None = None, **env: str) -> Iterator[Proxy]:
    """Two service processes, `a` and `b`, behind nginx; `env` for both, `per_upstream` by name."""
    if NGINX is None:
        pytest.skip(NO_NGINX)
    with ExitStack() as stack:
        upstreams = {}
        for name in ("a", "b"):
            settings = {
                "ASSIST_AGENT": f"{__name__}:ProxyAgent",
                "ASSIST_LOG_FORMAT": "json",
                UPSTREAM_NAME: name,
                **env,
                **(per_upstream or {}).get(name, {}),
            }
            upstreams[name] = stack.enter_context(running_server(settings))
        yield stack.enter_context(running_nginx(tmp, upstreams))


@pytest.fixture(scope="module")
def proxy(tmp_path_factory) -> Iterator[Proxy]:
    with proxied_pair(tmp_path_factory.mktemp("nginx")) as running:
        yield running


# --- What the files say, checked against the service's settings (no nginx needed) ---------


def directive(name: str, file: str) -> list[list[str]]:
    """The arguments of each `name ...;` line of a shipped file."""
    text = (SHIPPED / file).read_text()
    return [line.split() for line in re.findall(rf"(?m)^\s*{name}\s+([^;#]+);", text)]


def seconds(value: str) -> float:
    return float(value.removesuffix("s"))


def location_block(name: str) -> str:
    """The body of proxy.conf's `location <name> { ... }` (no nested blocks there)."""
    text = (SHIPPED / "proxy.conf").read_text()
    found = re.search(rf"(?m)^location {re.escape(name)} \{{\n(.*?)^\}}", text, re.S)
    assert found is not None, f"proxy.conf has no `location {name}`"
    return found.group(1)


def block_directive(block: str, name: str) -> list[list[str]]:
    return [line.split() for line in re.findall(rf"(?m)^\s*{name}\s+([^;#]+);", block)]


def test_the_stream_settings_leave_events_unbuffered():
    assert directive("proxy_buffering", "stream.conf") == [["off"]]
    assert directive("proxy_ignore_headers", "stream.conf") == [["X-Accel-Buffering"]]
    assert directive("gzip", "stream.conf") == [["off"]]


def test_every_streamed_answer_takes_the_stream_settings():
    text = (SHIPPED / "proxy.conf").read_text()
    streaming = re.findall(r"(?m)^location (.+?) \{\n(?:    .*\n|\s*\n)*?    include assist/stream\.conf;", text)
    assert sorted(streaming) == ["/assist/runs/", "= /assist", "= /v1/chat/completions", "@assist_stream_retry"]


def test_an_assist_stream_outlasts_the_pings_and_only_a_503_before_the_agent_is_retried():
    for name in ("= /assist", "@assist_stream_retry", "/assist/runs/"):
        ((read_timeout,),) = block_directive(location_block(name), "proxy_read_timeout")
        assert seconds(read_timeout) >= 3 * Settings().ping_interval, "a stream between two pings must not time out"
        # Nothing bounds a stream's whole length but the service's own time limit.
        assert not block_directive(location_block(name), "proxy_next_upstream_timeout")
    assert ["503", "=", "@assist_stream_retry"] in block_directive(location_block("= /assist"), "error_page")


def test_a_completion_is_never_retried_or_replaced_and_may_be_silent_for_a_whole_run():
    """A non-streamed completion's status is its run's outcome (500, 504, a 503 after the
    agent ran): nginx must pass it on as it is, and wait for the run to end."""
    block = location_block("= /v1/chat/completions")
    assert not block_directive(block, "proxy_intercept_errors")
    assert not block_directive(block, "error_page")
    ((read_timeout,),) = block_directive(block, "proxy_read_timeout")
    assert seconds(read_timeout) > Settings().request_timeout


def test_the_client_limits_are_the_services():
    defaults = Settings()
    assert directive("client_max_body_size", "proxy.conf") == [["1m"]] and defaults.max_body_bytes == 1024 * 1024
    assert seconds(directive("client_header_timeout", "proxy.conf")[0][0]) == defaults.header_timeout
    assert seconds(directive("client_body_timeout", "proxy.conf")[0][0]) == defaults.body_timeout
    ((count, size),) = directive("large_client_header_buffers", "proxy.conf")
    assert int(count) * int(size.removesuffix("k")) * 1024 == defaults.max_header_bytes


def test_both_sites_keep_upstream_connections_alive_but_never_past_uvicorns_own_timeout():
    uvicorn_keep_alive = uvicorn.Config(app="app.main:app").timeout_keep_alive
    assert directive("proxy_http_version", "proxy.conf") == [["1.1"]]
    assert ["Connection", '""'] in directive("proxy_set_header", "proxy.conf")
    for site in ("site-tls.conf", "site-compose.conf"):
        assert directive("include", site) == [["assist/http.conf"], ["assist/proxy.conf"]]
        assert re.search(r"(?m)^\s*least_conn;", (SHIPPED / site).read_text()), site
        ((timeout,),) = directive("keepalive_timeout", site)
        assert seconds(timeout) < uvicorn_keep_alive, site
        assert directive("keepalive", site), site


# --- Reading through the proxy ------------------------------------------------------------


def read_stream(client: httpx.Client, prompt: str, headers: dict | None = None) -> Stream:
    """POST /assist through the proxy and read the whole stream, frame by frame as it arrives."""
    with client.stream("POST", "/assist", json=new_body(prompt), headers=headers) as response:
        return read_response(response)


def served_by(stream: Stream) -> str:
    """The upstream that ran a `whoami` stream."""
    assert stream.events[0]["event_name"] == "STATUS", stream.raw
    return stream.events[0]["content"]


def access_entries(server: RunningServer) -> list[dict]:
    """The service's access log lines (JSON), one per request it ended."""
    entries = []
    for line in server.log().splitlines():
        if line.startswith("{"):
            entry = json.loads(line)
            if entry.get("logger") == "sentient_assist.access":
                entries.append(entry)
    return entries


def logged_request(proxy: Proxy, request_id: str, timeout: float = 5.0) -> dict | None:
    """The access log entry of `request_id`, from whichever process ended it (waits for it)."""
    found: list[dict] = []

    def look() -> bool:
        found.extend(e for s in proxy.upstreams.values() for e in access_entries(s) if e["request_id"] == request_id)
        return bool(found)

    return found[0] if wait_until(look, timeout) else None


# --- The checks ---------------------------------------------------------------------------


def test_events_pass_through_the_proxy_as_they_are_made(proxy):
    # STATUS, then a second of silence, then FINAL: a buffering proxy holds STATUS until the end.
    with proxy.client() as client:
        stream = read_stream(client, "silent:1")
    assert_well_ended(stream)
    assert stream.names() == ["STATUS", "FINAL", "done"]
    status, final = stream.frames[0], stream.frames[1]
    made_at = ULID.from_str(status.json["id"]).timestamp  # the service stamps each event as it makes it
    assert status.received_at - made_at < 0.1, "the first event waited in the proxy"
    assert status.received_at < ULID.from_str(final.json["id"]).timestamp, "an event arrived only with the next one"
    assert stream.headers["content-type"].startswith("text/event-stream")


def test_a_client_that_leaves_gets_its_agent_cancelled_through_the_proxy(proxy, tmp_path):
    marker = tmp_path / "cancelled"
    rid = f"leaves-{ULID()}"
    with proxy.client() as client:
        body = new_body(f"hang:{marker}")
        with client.stream("POST", "/assist", json=body, headers={"X-Request-ID": rid}) as response:
            assert response.status_code == 200
            next(iter_events(response))
    assert wait_for_file(marker, timeout=5) is not None, "the agent ran on after its client left the proxy"
    # The process that ran it saw its reader leave (nginx closed the upstream connection).
    entry = logged_request(proxy, rid)
    assert entry is not None and entry["outcome"] == "disconnected", entry


def test_requests_are_spread_over_both_processes_with_their_request_ids(proxy):
    ids = [f"spread-{index}-{ULID()}" for index in range(8)]
    with proxy.client() as client:
        streams = [read_stream(client, "whoami", headers={"X-Request-ID": rid}) for rid in ids]
    for rid, stream in zip(ids, streams, strict=True):
        assert_well_ended(stream)
        assert stream.headers["x-request-id"] == rid
    assert {served_by(stream) for stream in streams} == {"a", "b"}
    # Each id reached the process that ran it (its access log) and nginx's log, unchanged.
    for rid, stream in zip(ids, streams, strict=True):
        server = proxy.upstreams[served_by(stream)]
        assert wait_until(lambda s=server, r=rid: any(e["request_id"] == r for e in access_entries(s)), 5.0)
        assert any(f"request_id={rid} " in line for line in proxy.access_lines())


def test_without_a_request_id_nginx_makes_one_that_the_service_keeps(proxy):
    with proxy.client() as client:
        stream = read_stream(client, "whoami")
        malformed = read_stream(client, "whoami", headers={"X-Request-ID": "not a token; " + "x" * 200})
    for made in (stream, malformed):
        assert_well_ended(made)
        rid = made.headers["x-request-id"]
        assert re.fullmatch(r"[0-9a-f]{32}", rid), rid  # nginx's $request_id, not the service's ULID
        server = proxy.upstreams[served_by(made)]
        assert wait_until(lambda s=server, r=rid: any(e["request_id"] == r for e in access_entries(s)), 5.0)
        assert any(f"request_id={rid} " in line for line in proxy.access_lines())


def test_plain_http_moves_to_https_keeping_the_method(proxy):
    response = httpx.post(proxy.http_url + "/assist", json=new_body("whoami"), timeout=5)
    assert response.status_code == 308
    assert response.headers["location"].startswith("https://") and response.headers["location"].endswith("/assist")


def test_limits_are_kept_at_the_proxy_with_json_errors(proxy):
    with proxy.client() as client:
        too_large = client.post("/assist", content=b"x" * (Settings().max_body_bytes + 1))
        metrics = client.get("/metrics")
        ready = client.get("/readyz")
    assert too_large.status_code == 413
    assert "client_max_body_size" in too_large.json()["detail"]
    assert metrics.status_code == 404 and metrics.json() == {"detail": "Not Found"}
    assert ready.status_code == 200


def test_the_compose_site_passes_nginxs_own_check(tmp_path):
    """site-compose.conf as `nginx -t` reads it. The Debian nginx here may predate `resolve`
    (1.27.3): then the replicas' name is checked as a fixed address, the rest as shipped."""
    if NGINX is None:
        pytest.skip(NO_NGINX)
    shutil.copytree(SHIPPED, tmp_path / "assist", ignore=shutil.ignore_patterns("*.md"))
    site = tmp_path / "assist" / "site-compose.conf"
    text = site.read_text().replace("/var/log/nginx/", f"{tmp_path}/")
    version = subprocess.run([NGINX, "-v"], capture_output=True, text=True, timeout=10).stderr
    found = re.search(r"nginx/(\d+)\.(\d+)\.(\d+)", version)
    assert found is not None, version
    if tuple(int(part) for part in found.groups()) < (1, 27, 3):
        text, count = re.subn(r"server replica:(\d+) resolve;", r"server 127.0.0.1:\1;", text)
        assert count == 1
    site.write_text(text)
    write_main_conf(tmp_path, "site-compose.conf")
    checked = subprocess.run(
        [NGINX, "-t", "-p", str(tmp_path), "-c", str(tmp_path / "nginx.conf")],
        capture_output=True,
        text=True,
        timeout=10,
    )
    assert checked.returncode == 0, checked.stderr
    assert "[warn]" not in checked.stderr and "[emerg]" not in checked.stderr, checked.stderr


def test_with_no_process_reachable_the_client_gets_a_json_503_to_retry(tmp_path):
    if NGINX is None:
        pytest.skip(NO_NGINX)

    class Gone(RunningServer):
        def __init__(self) -> None:  # a free port: nothing listens there
            self.url = f"http://127.0.0.1:{free_port()}"

    with running_nginx(tmp_path, {"a": Gone(), "b": Gone()}) as proxy, proxy.client() as client:
        response = client.post("/assist", json=new_body("whoami"), headers={"X-Request-ID": "nobody-home"})
    assert response.status_code == 503
    assert response.headers["retry-after"] == "5" and response.headers["x-request-id"] == "nobody-home"
    assert "retry" in response.json()["detail"]
    assert "127.0.0.1" not in response.text  # nothing about the processes behind


def hold_stream(stack: ExitStack, proxy: Proxy, request_id: str, seconds: float) -> tuple[str, Iterator[Event]]:
    """Start a `whoami:seconds` stream and read its first event: the process it runs on, and
    the rest of its events (closed with `stack`, or when the caller drops them)."""
    client = stack.enter_context(proxy.client())
    body = new_body(f"whoami:{seconds}")
    response = stack.enter_context(client.stream("POST", "/assist", json=body, headers={"X-Request-ID": request_id}))
    assert response.status_code == 200
    events = iter_events(response)
    for event in events:
        return event.json["content"], events
    raise AssertionError("the stream ended before its first event")


def refuses_connections(server: RunningServer) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", int(server.url.rsplit(":", 1)[1])), timeout=0.5):
            return False
    except OSError:
        return True


def test_sigterm_drains_one_process_while_the_other_takes_the_new_requests(tmp_path):
    with proxied_pair(tmp_path, ASSIST_SHUTDOWN_GRACE="10") as proxy, ExitStack() as held:
        # One stream open on each process: with as many connections each, least_conn leaves
        # the choice to their turn, so new requests are sent to the stopping one too.
        (stopping_name, stopping_lines), (staying_name, staying_lines) = (
            hold_stream(held, proxy, f"held-{index}", 3) for index in range(2)
        )
        assert {stopping_name, staying_name} == {"a", "b"}, "least_conn should put one stream on each"
        stopping = proxy.upstreams[stopping_name]
        stopping.process.send_signal(signal.SIGTERM)
        assert wait_until(lambda: refuses_connections(stopping), 5.0), "the stopping process kept accepting"

        with proxy.client() as client:
            new = [read_stream(client, "whoami", {"X-Request-ID": f"after-stop-{i}"}) for i in range(6)]
        for stream in new:
            assert_well_ended(stream)
            assert served_by(stream) == staying_name

        # The stream open on the stopping process finishes within its grace, whole.
        for events in (stopping_lines, staying_lines):
            rest = [event.event or "" for event in events]
            assert any(name.startswith("FINAL") for name in rest) and "done" in rest and "error" not in rest
        assert stopping.process.wait(timeout=15) in (0, -signal.SIGTERM)
        assert "Traceback" not in stopping.log()
        assert not any(e["request_id"].startswith("after-stop-") for e in access_entries(stopping))


def test_a_process_at_its_stream_limit_has_the_request_retried_once_on_the_other(tmp_path):
    limits = {"a": {"ASSIST_MAX_STREAMS": "1"}, "b": {"ASSIST_MAX_STREAMS": "2"}}
    with proxied_pair(tmp_path, per_upstream=limits) as proxy, ExitStack() as held:
        # (The lines are kept: a reader dropped is a stream closed.)
        streams = [hold_stream(held, proxy, f"held-{index}", 20) for index in range(2)]
        assert {name for name, _ in streams} == {"a", "b"}, "least_conn should put one stream on each"
        # `a` is full; the new requests are sent to each process in turn, and those `a` refuses
        # (503 before its agent starts) are run by `b` instead.
        with proxy.client() as client:
            new = [read_stream(client, "whoami", {"X-Request-ID": f"retried-{i}"}) for i in range(4)]
        for stream in new:
            assert_well_ended(stream)
            assert served_by(stream) == "b"
        refused = [e["request_id"] for e in access_entries(proxy.upstreams["a"]) if e["status"] == 503]
        assert refused and set(refused) <= {f"retried-{i}" for i in range(4)}, refused
        assert all(e["status"] == 200 for e in access_entries(proxy.upstreams["b"]) if e["request_id"] in refused)

        # Both full: the client gets the service's 503 and its Retry-After, from the retry.
        streams.append(hold_stream(held, proxy, "held-2", 20))
        assert streams[-1][0] == "b"
        with proxy.client() as client:
            full = client.post("/assist", json=new_body("whoami"), headers={"X-Request-ID": "both-full"})
        assert full.status_code == 503
        assert full.headers["retry-after"] == "1"
        assert "concurrent streams" in full.json()["detail"]
        assert full.headers["x-request-id"] == "both-full"


def test_a_completions_run_outcome_reaches_the_client_as_the_service_sent_it(tmp_path):
    """The time limit's 504 (and OpenAI's error body) passes through; the agent ran once."""
    with proxied_pair(tmp_path, ASSIST_REQUEST_TIMEOUT="1") as proxy, proxy.client() as client:
        answer = client.post(
            "/v1/chat/completions",
            json={"model": "scripted", "messages": [{"role": "user", "content": "silent:5"}]},
            headers={"X-Request-ID": "completion-times-out"},
        )
        assert answer.status_code == 504, answer.text
        assert answer.json()["error"]["code"] == "504"
        assert logged_request(proxy, "completion-times-out") is not None
        runs = [
            e for s in proxy.upstreams.values() for e in access_entries(s) if e["request_id"] == "completion-times-out"
        ]
        assert len(runs) == 1, runs
