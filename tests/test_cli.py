"""The command line and DefaultServer, run as a user runs them."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from sentient_assist import __version__
from tests.support.server import ROOT, clean_env, running_command
from tests.support.sse import new_body, read_stream


def run_cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "app", *args], cwd=ROOT, env=clean_env(env), capture_output=True, text=True, timeout=30
    )


def test_an_unknown_agent_stops_start_up_listing_the_agents_found():
    result = run_cli("serve", "--agent", "no_such_agent")
    assert result.returncode == 2
    assert "no_such_agent" in result.stderr and "showcase" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_bad_setting_stops_start_up_naming_the_variable():
    result = run_cli("serve", env={"ASSIST_REQUEST_TIMEOUT": "soon"})
    assert result.returncode == 2
    assert "ASSIST_REQUEST_TIMEOUT" in result.stderr and "Traceback" not in result.stderr


def test_agents_lists_the_agents_folder_and_says_what_an_agent_is_missing():
    result = run_cli("agents", env={"MODEL_NAME": ""})
    assert result.returncode == 0
    lines = {line.split()[0]: line for line in result.stdout.splitlines()}
    assert set(lines) >= {"showcase", "chat", "assistant"}
    assert "No key, no network" in lines["showcase"]
    assert "MODEL_NAME is not set" in lines["chat"]


def test_an_llm_agent_without_model_name_does_not_start_and_says_how_to_fix_it():
    result = run_cli("serve", "--agent", "assistant", env={"MODEL_NAME": ""})
    assert result.returncode == 2
    assert "MODEL_NAME is not set" in result.stderr and "MODEL_NAME=" in result.stderr
    assert "Traceback" not in result.stderr


def test_serve_with_two_workers_streams(serve):
    stream = read_stream(serve(args=["--workers", "2"]).url, new_body("hi"))
    assert stream.names()[-1] == "done"


def test_default_server_runs_an_agent_written_the_0_3_0_way(tmp_path):
    script = tmp_path / "serve_it.py"
    script.write_text(
        textwrap.dedent("""
        import sys

        from sentient_assist import AbstractAgent, DefaultServer, Query, ResponseHandler, Session

        class Echo(AbstractAgent):
            def __init__(self):
                super().__init__("Echo agent")

            async def assist(self, session: Session, query: Query, response_handler: ResponseHandler):
                stream = response_handler.create_text_stream("FINAL_RESPONSE")
                await stream.emit_chunk(query.prompt)
                await stream.complete()
                await response_handler.complete()

        DefaultServer(Echo()).run(host="127.0.0.1", port=int(sys.argv[1]))
    """)
    )
    with running_command(lambda port: [sys.executable, str(script), str(port)]) as server:
        stream = read_stream(server.url, new_body("echo me"))
    assert stream.names() == ["FINAL_RESPONSE", "FINAL_RESPONSE", "done"]
    assert stream.events[0]["content"] == "echo me"
    assert stream.events[0]["source"] == "Echo agent"


def test_run_prints_the_answer_and_json_gives_the_whole_result():
    from sentient_assist import AgentResult

    plain = run_cli("run", "showcase", "hello there")
    assert plain.returncode == 0 and "You asked: 'hello there'" in plain.stdout
    as_json = run_cli("run", "showcase", "error", "--json")
    result = AgentResult.model_validate_json(as_json.stdout)
    assert result.errors[0].code == 400 and result.text.startswith("After an error event")


def test_chat_in_a_terminal_streams_answers_and_remembers_the_first_turn():
    pexpect = pytest.importorskip("pexpect")
    child = pexpect.spawn(
        sys.executable,
        ["-m", "app", "chat", "--agent", "showcase"],
        cwd=str(ROOT),
        env=clean_env(),
        encoding="utf-8",
        timeout=20,
        dimensions=(50, 140),
    )
    try:
        child.expect("you ›")
        child.sendline("first question")
        child.expect("SOURCES")
        child.expect("You asked: 'first question'")
        child.expect("turn 1 of our chat")
        child.expect("you ›")
        child.sendline("and another")
        child.expect("turn 2 of our chat")
        child.expect("you ›")
        child.sendline("error")
        child.expect("error 400: This is what an error event looks like")
        child.expect("you ›")
        child.sendeof()
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0
    assert "Traceback" not in (child.before or "")


def test_chat_over_http_exits_cleanly_on_ctrl_c(showcase_server):
    pexpect = pytest.importorskip("pexpect")
    child = pexpect.spawn(
        sys.executable,
        ["-m", "app", "chat", "--url", showcase_server.url + "/assist"],
        cwd=str(ROOT),
        env=clean_env(),
        encoding="utf-8",
        timeout=20,
        dimensions=(50, 140),
    )
    try:
        child.expect("you ›")
        child.sendline("over the wire")
        child.expect("You asked: 'over the wire'")
        child.expect("you ›")
        child.sendintr()
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0 and "Traceback" not in (child.before or "")


def test_version_is_the_packages():
    done = run_cli("--version")
    assert done.returncode == 0 and done.stdout.strip() == f"sentient-assist {__version__}"
