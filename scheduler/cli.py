"""The `pagemind` console script: the runtime's commands plus the daemon's — `serve`, `send`, `agents --server` —
and `run` sent through a live local daemon instead of fighting it for the stores.

The runtime must not import the scheduler, so this module extends the runtime's parser (`runtime.cli.main`)
rather than the other way round. Like it, it loads only the standard library at module level: `pagemind --help`
pays for no web framework (tests/runtime/cli/test_cli_startup.py).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pagemind.runtime.cli import commands
from pagemind.runtime.cli.main import main as runtime_main
from pagemind.runtime.cli.shared import CliError, error_line, out

if TYPE_CHECKING:
    from pagemind.runtime.process.settings import Settings

LOOPBACK = ("127.0.0.1", "localhost", "::1")
DEFAULT_PORT = 8283


def add_parsers(sub: Any) -> None:
    """The daemon's commands, and `--server` on `agents`; `run` learns to go through a local daemon."""
    serve = sub.add_parser("serve", help="serve every agent YAML in a folder over HTTP (the daemon)")
    serve.add_argument("directory", help="folder of agent and template YAML files")
    serve.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to bind (anything but loopback needs PAGEMIND_API_TOKEN or API keys; default 127.0.0.1)",
    )
    serve.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"default {DEFAULT_PORT}")
    serve.add_argument("--concurrency", type=int, default=64, help="agents running turns at once (default 64)")
    serve.add_argument(
        "--grace",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="on SIGTERM/SIGINT, how long turns in flight may take to finish (default 30)",
    )
    serve.add_argument(
        "--max-body",
        type=int,
        default=1024 * 1024,
        metavar="BYTES",
        help="largest request body accepted (default 1 MiB)",
    )
    serve.add_argument(
        "--public-url", metavar="URL", help="the URL other processes reach this daemon at (default http://HOST:PORT)"
    )
    serve.add_argument(
        "--workers",
        type=int,
        default=1,
        metavar="N",
        help="daemon processes sharing the port, to use N cores (PostgreSQL only; default 1)",
    )
    serve.add_argument(
        "--set",
        dest="daemon_settings",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a daemon setting (docs: DaemonConfig), e.g. linger_s=0 or hold_steps=false; repeatable",
    )
    serve.add_argument("--reuse-port", action="store_true", help=argparse.SUPPRESS)  # a worker of --workers
    serve.add_argument("--ready-fd", type=int, help=argparse.SUPPRESS)  # a worker tells its supervisor it listens
    serve.set_defaults(handler=cmd_serve, loop_factory=serve_loop)
    send = sub.add_parser("send", help="send a message to an agent a daemon serves, print the reply")
    send.add_argument("agent", help="the agent's name")
    send.add_argument("text")
    _add_server(send)
    send.add_argument("--key", metavar="KEY", help="idempotency key: the same key again returns the first reply")
    send.add_argument(
        "--timeout", type=float, default=300.0, metavar="SECONDS", help="how long to wait for the reply (default 300)"
    )
    send.set_defaults(handler=cmd_send)
    agents = sub.choices["agents"]
    _add_server(agents)
    agents.set_defaults(handler=cmd_agents)
    sub.choices["run"].set_defaults(handler=cmd_run)


def _add_server(parser: argparse.ArgumentParser) -> None:
    # No default here: the parser is built for --help too, which must not import Settings (pydantic); the
    # commands fall back to `settings.server` ($PAGEMIND_SERVER).
    parser.add_argument(
        "--server",
        metavar="URL",
        help="a daemon's URL, e.g. http://127.0.0.1:8283 (default $PAGEMIND_SERVER); the token is $PAGEMIND_API_TOKEN",
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `pagemind` console script."""
    return runtime_main(argv, extend=add_parsers)


# -- serve --------------------------------------------------------------------------------------------------------


def check_binding(host: str, token: str | None, keyed: bool = False) -> str | None:
    """Why the daemon must not bind to `host` (None: it may): without a token or an API key (`keyed`: the database
    holds a live one, so every request needs one) only this machine may reach it."""
    if token is None and not keyed and host not in LOOPBACK:
        return (
            f"refusing to serve on {host} without PAGEMIND_API_TOKEN or an API key: anyone who reaches that address "
            "could read and drive every agent. Set PAGEMIND_API_TOKEN, make keys (`pagemind keys create`), or "
            "bind to 127.0.0.1"
        )
    return None


def has_keys(settings: Settings) -> bool:
    """Whether the database holds a live API key (the daemon then requires a credential on every request)."""
    from pagemind.runtime.state.keys import KeyStore
    from pagemind.runtime.state.store import StateStore

    engine = StateStore.open(settings.database_url).engine
    try:
        return KeyStore(engine).any_live()
    finally:
        engine.dispose()


def serve_loop() -> Any:
    """`serve`'s event loop, `scheduler.api.serve.serving_loop`, imported only when `serve` runs (the CLI's start
    loads no daemon module: tests/runtime/cli/test_cli_startup.py)."""
    from pagemind.scheduler.api.serve import serving_loop

    return serving_loop()


async def cmd_serve(args: argparse.Namespace, settings: Settings) -> int:
    """Run the daemon and its API until SIGTERM or SIGINT, then stop gracefully and exit 0."""
    from pagemind.runtime.process.settings import Settings

    token = settings.api_token
    # The daemon's model calls go out on aiohttp unless told otherwise (`runtime.model.transports.AiohttpPost`);
    # set for this process's model clients and the workers it starts.
    Settings.export("PAGEMIND_HTTP_CLIENT", "aiohttp", replace=False)
    refusal = check_binding(args.host, token, token is None and args.host not in LOOPBACK and has_keys(settings))
    if refusal:
        raise CliError(refusal)
    from pathlib import Path

    if not Path(args.directory).is_dir():
        raise CliError(f"{args.directory} is not a folder of agent YAML files")
    if args.concurrency <= 0 or args.max_body <= 0 or args.grace < 0 or not 0 < args.port < 65536 or args.workers <= 0:
        raise CliError("--port, --concurrency, --max-body and --workers must be positive, --grace not negative")
    from pagemind.scheduler.daemon_config import DaemonConfig

    try:
        DaemonConfig.from_settings(args.daemon_settings)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    if args.workers > 1:
        from sqlalchemy.exc import ArgumentError

        from pagemind.runtime.state.dialects import dialect_for_url

        try:
            shared = dialect_for_url(settings.database_url).notices
        except ArgumentError:  # not a database URL: refused below as not PostgreSQL
            shared = False
        if not shared:
            raise CliError(
                "--workers needs PostgreSQL (DATABASE_URL=postgresql://…): the workers share the "
                "database, and SQLite takes one writer at a time and relays no events between processes"
            )
        from pagemind.scheduler.api.serve import public_url
        from pagemind.scheduler.workers import supervise

        return await supervise(args, public_url(args))
    from pagemind.scheduler.api.serve import serve

    return await serve(args, settings, token)


# -- send, agents, run through a daemon ---------------------------------------------------------------------------


def _client(url: str) -> Any:
    from pagemind.scheduler.api.client import DaemonClient

    return DaemonClient(url)


def _client_error(exc: Exception) -> CliError:
    status = getattr(exc, "status", 0)
    return CliError(str(exc), code={404: 2, 422: 2, 401: 2, 0: 1}.get(status, 1))


def print_run(run: dict[str, Any]) -> int:
    """Print a run's reply; the exit code: 0 done, 1 failed or not finished."""
    if run["state"] == "done":
        out(run.get("reply") or "(no reply)")
        return 0
    if run["state"] == "failed":
        error_line(f"the turn failed: {run.get('error')}")
        return 1
    sys.stderr.write(
        f"error: the turn has not finished ({run['state']}); its result will be at /v1/runs/{run['run_id']}\n"
    )
    return 1


async def cmd_send(args: argparse.Namespace, settings: Settings) -> int:
    """Send one message through a daemon and print the reply."""
    import asyncio

    from pagemind.scheduler.api.client import ClientError

    if args.timeout <= 0:
        raise CliError("--timeout must be positive")
    args.server = args.server or settings.server
    if args.server is None:
        raise CliError("send needs a daemon: give --server URL or set PAGEMIND_SERVER")
    from pagemind.runtime.cli.live_reply import stdout_is_terminal

    if stdout_is_terminal():
        return await send_streamed(args.server, args.agent, args.text, args.key, min(args.timeout, 600.0))
    with _client(args.server) as client:
        try:
            run = await asyncio.to_thread(
                client.send, args.agent, args.text, idempotency_key=args.key, timeout_s=min(args.timeout, 600.0)
            )
        except ClientError as exc:
            raise _client_error(exc) from None
    return print_run(run)


async def send_streamed(server: str, agent: str, text: str, key: str | None, timeout_s: float) -> int:
    """`send` (or `run` through a daemon) on a terminal: through the daemon's event stream, the reply printed as
    its tokens arrive (`reply_delta`; a `reply_reset` handled as `LiveReply` says), then ended by the
    authoritative run of `done`; the exit code as `print_run`'s."""
    from pagemind.runtime.cli.live_reply import LiveReply
    from pagemind.scheduler.api.client import ClientError

    live = LiveReply()
    run: dict[str, Any] | None = None
    with _client(server) as client:
        try:
            async for event, data in client.stream_send(agent, text, idempotency_key=key, timeout_s=timeout_s):
                if event == "reply_delta":
                    live.delta(data.get("text") or "")
                elif event == "reply_reset":
                    live.reset()
                elif event == "done":
                    run = data
        except ClientError as exc:
            live.abandon()
            raise _client_error(exc) from None
    if run is None:
        live.abandon()
        raise CliError(f"the event stream from {server} ended before the run did", code=1)
    if run["state"] == "done":
        live.finish(run.get("reply") or "(no reply)")
        return 0
    live.abandon()
    return print_run(run)


async def cmd_agents(args: argparse.Namespace, settings: Settings) -> int:
    """`agents --server URL`: the agents a daemon serves, or `agents purge NAME` through it; otherwise the stored
    agents (the runtime's command)."""
    args.server = args.server or settings.server
    if args.server is None:
        return await commands.cmd_agents(args, settings)
    from pagemind.runtime.erasure.record import summary
    from pagemind.scheduler.api.client import ClientError

    if args.action == "purge" and len(args.names) == 1:
        with _client(args.server) as client:
            try:
                erased = client.purge(args.names[0])
            except ClientError as exc:
                raise _client_error(exc) from None
        out(f"purged '{args.names[0]}': {summary(erased['counts'])}")
        return 0
    if args.action or args.names:
        raise CliError("`agents rename` works on the database, not through --server")

    with _client(args.server) as client:
        try:
            agents = client.agents()
        except ClientError as exc:
            raise _client_error(exc) from None
    if not agents:
        out("the daemon serves no agents yet")
    for a in agents:
        made = f"from {a['template']}" if a.get("template") else ""
        out(f"{a['name']:<24} pending {a.get('pending', 0):<4} {made}")
    return 0


async def cmd_run(args: argparse.Namespace, settings: Settings) -> int:
    """`run`, through a live daemon serving this database when there is one (it holds the agent's stores: a
    second process would wait for them, or find them busy); on its own otherwise."""
    url = None if args.reset_memory or getattr(args, "trace", None) else live_daemon(settings)
    if url is not None:
        name = agent_name(args.agent)
        import asyncio

        from pagemind.scheduler.api.client import ClientError

        with _client(url) as client:
            try:
                if await asyncio.to_thread(client.has_agent, name):
                    sys.stderr.write(f"note: sending through the daemon at {url}, which serves this database\n")
                    from pagemind.runtime.cli.live_reply import stdout_is_terminal

                    if stdout_is_terminal():
                        return await send_streamed(url, name, args.message, args.idempotency_key, 300.0)
                    run = await asyncio.to_thread(client.send, name, args.message, idempotency_key=args.idempotency_key)
                    return print_run(run)
            except ClientError as exc:
                raise _client_error(exc) from None
    return await commands.cmd_run(args, settings)


def agent_name(target: str) -> str:
    """The agent's name from a YAML path or a stored name."""
    from pathlib import Path

    path = Path(target)
    if path.suffix in {".yaml", ".yml"} or path.exists():
        from pagemind.runtime.spec.loading import load_spec

        return load_spec(path).name
    return target


def live_daemon(settings: Settings) -> str | None:
    """The URL of a daemon serving this database with a fresh heartbeat, or None."""
    from pagemind.runtime.cli.held_store import live_daemon_url

    return live_daemon_url(settings)


if __name__ == "__main__":
    # `python -m pagemind.scheduler.cli` (tests run the CLI this way, without the console script).
    sys.exit(main())
