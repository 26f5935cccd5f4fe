"""The command line, installed as `assist` (also `python -m sentient_assist`, and `python -m app`
in a checkout): serve, agents, chat, run."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import secrets
import socket
import sys
import tempfile
from collections.abc import Iterator
from typing import Any

from sentient_assist.registry import available_agents, load_agent
from sentient_assist.runtime.errors import AgentNotFoundError, SettingsError
from sentient_assist.server.settings import load_settings
from sentient_assist.version import __version__


def _serve(args: argparse.Namespace) -> int:
    if args.workers < 1:
        print(f"error: --workers must be 1 or more, got {args.workers}", file=sys.stderr)
        return 2
    # Flags become settings through the environment, so --workers and --reload
    # processes, which build the app afresh from it, see them too.
    for flag, variable in (
        ("host", "ASSIST_HOST"),
        ("port", "ASSIST_PORT"),
        ("agent", "ASSIST_AGENT"),
        ("log_level", "ASSIST_LOG_LEVEL"),
    ):
        value = getattr(args, flag)
        if value is not None:
            os.environ[variable] = str(value)
    try:
        settings = load_settings()
        agent = load_agent(settings.agent, settings.agents_dir)
        from sentient_assist.server.faces import check_faces

        check_faces(settings.faces, settings)
        if settings.redis_url is not None:
            from sentient_assist.server.redis_policy import check_eviction_policy

            check_eviction_policy(settings.redis_url.get_secret_value())
        from sentient_assist.server.tracing import check_tracing_installed, tracing_configured

        if tracing_configured():
            check_tracing_installed()
    except (SettingsError, AgentNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2

    import uvicorn

    from sentient_assist.server.serving import uvicorn_options

    # A socket already listening (a process manager's, a test's) stands in for the host and port.
    where: dict[str, Any] = {"fd": args.fd} if args.fd is not None else {"host": settings.host, "port": settings.port}
    if args.fd is not None:
        _no_delay(args.fd)
    options: dict[str, Any] = {**where, **uvicorn_options(settings)}
    if args.reload or args.workers > 1:
        if settings.resume_secret is None:
            # One secret for all the workers of this start: a pause made by one resumes in any.
            os.environ["ASSIST_RESUME_SECRET"] = secrets.token_urlsafe(32)
        if args.reload:
            # The working directory, as uvicorn watches by default, and the agents' own when
            # ASSIST_AGENTS_DIR puts them elsewhere: editing an agent restarts the service.
            options["reload_dirs"] = sorted({os.getcwd(), str(settings.agents_dir.resolve())})
        with _metrics_shared_across_workers(args.workers > 1):
            # Each child builds the app from the environment with our own factory: never a bare
            # `app.main:app`, which in a user's project would be the user's module.
            uvicorn.run(
                "sentient_assist.server.app:create_app",
                factory=True,
                reload=args.reload,
                workers=None if args.reload else args.workers,
                **options,
            )
    else:
        from sentient_assist.server.app import create_app

        uvicorn.run(create_app(settings, agent), **options)
    return 0


def _no_delay(fd: int) -> None:
    """TCP_NODELAY on an inherited listening socket, which what it accepts inherits: uvicorn takes
    `fd` as a Unix socket and sets it on none of them, as it does on a port of its own."""
    with socket.socket(fileno=os.dup(fd)) as listener:
        if listener.family in (socket.AF_INET, socket.AF_INET6):
            listener.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


@contextlib.contextmanager
def _metrics_shared_across_workers(enabled: bool) -> Iterator[None]:
    """Workers write their metrics to one folder, and /metrics in any worker sums them."""
    from sentient_assist.server.metrics import MULTIPROC_ENV

    if not enabled or os.environ.get(MULTIPROC_ENV):
        yield
        return
    with tempfile.TemporaryDirectory(prefix="assist-metrics-") as folder:
        os.environ[MULTIPROC_ENV] = folder
        try:
            yield
        finally:
            del os.environ[MULTIPROC_ENV]


def _agents(args: argparse.Namespace) -> int:
    try:
        folder = load_settings().agents_dir
    except SettingsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    names = available_agents(folder)
    if not names:
        print(
            f"no agents: none in {folder.resolve()}/ (ASSIST_AGENTS_DIR) and no installed package's "
            "`sentient_assist.agents` entry point",
            file=sys.stderr,
        )
    for name in names:
        try:
            agent = load_agent(name, folder)
        except (AgentNotFoundError, SettingsError) as exc:
            print(f"{name:<20} (cannot load: {exc})")
            continue
        print(f"{name:<20} {agent.description}".rstrip())
    return 0


def _chat(args: argparse.Namespace) -> int:
    from rich.console import Console

    from sentient_assist.facade.agent import Agent
    from sentient_assist.facade.terminal import chat

    if args.url:
        agent, title = Agent(args.url, api_key=args.api_key or os.environ.get("ASSIST_API_KEY")), args.url
    else:
        try:
            agent_object = load_agent(args.agent or load_settings().agent)
        except (SettingsError, AgentNotFoundError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        agent, title = Agent(agent_object), agent_object.name
    try:
        asyncio.run(chat(agent, Console(highlight=False), title))
    except KeyboardInterrupt:
        print()
    return 0


def _run(args: argparse.Namespace) -> int:
    from sentient_assist.facade.agent import Agent

    try:
        agent = Agent(load_agent(args.agent))
    except (AgentNotFoundError, SettingsError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    result = agent.run_sync(args.prompt)
    print(result.model_dump_json(indent=2) if args.json else result.text)
    return 1 if result.errors and not result.text else 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="assist", description="Serve AI agents to Sentient Chat.")
    parser.add_argument("--version", action="version", version=f"sentient-assist {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser("serve", help="run the /assist service")
    serve.add_argument("--host", help="address to listen on (ASSIST_HOST, default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port to listen on (ASSIST_PORT, default 8000)")
    serve.add_argument("--fd", type=int, help="serve on the listening socket of this inherited file descriptor")
    serve.add_argument("--agent", help="agent name from agents/ or module:attr (ASSIST_AGENT, default showcase)")
    serve.add_argument("--reload", action="store_true", help="restart when the code changes (development)")
    serve.add_argument("--workers", type=int, default=1, help="worker processes (default 1)")
    serve.add_argument("--log-level", dest="log_level", help="critical, error, warning, info, debug (ASSIST_LOG_LEVEL)")
    serve.set_defaults(run=_serve)

    agents = commands.add_parser("agents", help="list the agents in agents/ (ASSIST_AGENTS_DIR) and installed packages")
    agents.set_defaults(run=_agents)

    chat = commands.add_parser("chat", help="chat with an agent in the terminal")
    where = chat.add_mutually_exclusive_group()
    where.add_argument("--url", help="an /assist URL to chat with, e.g. http://127.0.0.1:8000/assist")
    where.add_argument("--agent", help="an agent to run in this process (default: ASSIST_AGENT, showcase)")
    chat.add_argument("--api-key", dest="api_key", help="bearer key for --url (or ASSIST_API_KEY)")
    chat.set_defaults(run=_chat)

    run = commands.add_parser("run", help="run one turn in this process and print the answer")
    run.add_argument("agent", help="agent name from agents/ or module:attr")
    run.add_argument("prompt", help="the prompt")
    run.add_argument("--json", action="store_true", help="print the whole AgentResult as JSON")
    run.set_defaults(run=_run)
    return parser


def main(argv: list[str] | None = None) -> int:
    # `python -m sentient_assist` puts the working directory first on sys.path; the `assist` script does
    # the same (as uvicorn does), so a module:attr agent spec means the same to both.
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    args = build_parser().parse_args(argv)
    code: int = args.run(args)
    return code
