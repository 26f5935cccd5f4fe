"""The command line: `python -m app serve | agents` (also installed as `assist`)."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile

from app.registry import available_agents, load_agent
from app.runtime.errors import AgentNotFoundError, SettingsError
from app.server.settings import load_settings


def _serve(args: argparse.Namespace) -> int:
    if args.workers < 1:
        print(f"error: --workers must be 1 or more, got {args.workers}", file=sys.stderr)
        return 2
    # Flags become settings through the environment, so --workers and --reload
    # processes, which import `app.main:app` afresh, see them too.
    for flag, variable in (("host", "ASSIST_HOST"), ("port", "ASSIST_PORT"), ("agent", "ASSIST_AGENT"),
                           ("log_level", "ASSIST_LOG_LEVEL")):
        value = getattr(args, flag)
        if value is not None:
            os.environ[variable] = str(value)
    try:
        settings = load_settings()
        agent = load_agent(settings.agent)
    except (SettingsError, AgentNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2

    import uvicorn

    from app.server.logs import log_config

    options = dict(
        host=settings.host,
        port=settings.port,
        log_config=log_config(settings.log_format, settings.log_level),
        access_log=False,  # ours logs each request, with its request id
        # A backstop: streams end themselves after ASSIST_SHUTDOWN_GRACE.
        timeout_graceful_shutdown=int(settings.shutdown_grace) + 5,
    )
    if args.reload or args.workers > 1:
        with _metrics_shared_across_workers(args.workers > 1):
            uvicorn.run("app.main:app", reload=args.reload, workers=None if args.reload else args.workers, **options)
    else:
        from app.server.app import create_app

        uvicorn.run(create_app(settings, agent), **options)
    return 0


@contextlib.contextmanager
def _metrics_shared_across_workers(enabled: bool):
    """Workers write their metrics to one folder, and /metrics in any worker sums them."""
    from app.server.metrics import MULTIPROC_ENV

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
    for name in available_agents():
        try:
            agent = load_agent(name)
        except AgentNotFoundError as exc:
            print(f"{name:<20} (cannot load: {exc})")
            continue
        print(f"{name:<20} {agent.description}".rstrip())
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m app", description="Serve AI agents to Sentient Chat.")
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser("serve", help="run the /assist service")
    serve.add_argument("--host", help="address to listen on (ASSIST_HOST, default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port to listen on (ASSIST_PORT, default 8000)")
    serve.add_argument("--agent", help="agent name from agents/ or module:attr (ASSIST_AGENT, default showcase)")
    serve.add_argument("--reload", action="store_true", help="restart when the code changes (development)")
    serve.add_argument("--workers", type=int, default=1, help="worker processes (default 1)")
    serve.add_argument("--log-level", dest="log_level", help="critical, error, warning, info, debug (ASSIST_LOG_LEVEL)")
    serve.set_defaults(run=_serve)

    agents = commands.add_parser("agents", help="list the agents found in agents/")
    agents.set_defaults(run=_agents)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
