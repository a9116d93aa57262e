"""`pagemind serve`: the daemon and its API in one process, until SIGTERM or SIGINT.

Shutdown: the first signal stops the daemon taking work and lets the turns in flight finish within the grace
period (`Daemon.stop`), while uvicorn stops accepting connections and lets the requests in flight end (a waiting
`sync` request gets its reply when its turn ends within the grace period, else 503 `daemon_stopping` naming the run,
which is stored and pending again; a stream ends with the same `error`); then the process exits 0. A second signal
ends the remaining connections at once. Uvicorn's own signal handling is replaced: it re-raises the signal after
shutting down, which would end the process with the signal's status instead of 0.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import socket
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pagemind.runtime.process.settings import Settings
    from pagemind.scheduler.catalog import AgentCatalog


async def serve(args: argparse.Namespace, settings: Settings, token: str | None) -> int:
    """Load the folder, start the daemon, serve the API; stop gracefully on a signal. Returns the exit code."""
    import uvicorn

    from pagemind.runtime.cli.shared import CliError, open_store
    from pagemind.scheduler.api.app import create_app
    from pagemind.scheduler.catalog import AgentCatalog
    from pagemind.scheduler.daemon import Daemon
    from pagemind.scheduler.daemon_config import DaemonConfig
    from pagemind.scheduler.gc_tuning import tune_for_serving

    url = public_url(args)
    store = open_store(settings)  # a purge a kill cut short is finished here (`runtime.erasure`)
    catalog = AgentCatalog(args.directory, store)
    report_unloaded(catalog)
    load_before_serving(catalog)
    if not getattr(args, "reuse_port", False):  # one process: it owns the embedded store (workers share a server)
        claim_archival_store(catalog, settings)
    chosen = DaemonConfig.from_settings(args.daemon_settings)  # CliError-free: checked in cmd_serve already
    config = chosen.model_copy(update={"concurrency": args.concurrency, "grace_s": args.grace, "url": url})
    daemon = Daemon(catalog, settings, config=config)
    app = create_app(daemon, token, max_body=args.max_body)
    server_config = uvicorn.Config(
        app,
        host=args.host,
        port=args.port,
        log_config=None,
        access_log=False,
        lifespan="off",
        timeout_graceful_shutdown=max(1, int(args.grace) + 5),
    )
    stopping: list[asyncio.Task[None]] = []

    def started(server: uvicorn.Server) -> None:
        tune_for_serving()  # everything made at start lives until exit: out of the collector's sight
        auth = (
            "bearer token or API key required"
            if app.state.keyring.required
            else "no PAGEMIND_API_TOKEN and no API key: loopback only, no authentication"
        )
        unloaded = f", {len(catalog.folder.errors)} file(s) not loaded (above)" if catalog.folder.errors else ""
        sys.stderr.write(
            f"pagemind: serving {len(daemon.list_agents())} agent(s) from {args.directory}{unloaded} "
            f"on {url} ({auth}); SIGTERM or Ctrl-C stops it\n"
        )
        sys.stderr.flush()
        tell_supervisor(getattr(args, "ready_fd", None))

    server = _Server(server_config, started)
    sockets = [_reuse_port_socket(args.host, args.port)] if getattr(args, "reuse_port", False) else None

    def on_signal() -> None:
        if stopping:
            server.force_exit = True  # a second signal: stop waiting for open connections
            return
        stopping.append(asyncio.ensure_future(daemon.stop(args.grace)))
        server.should_exit = True

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal)
    await daemon.start()
    try:
        await server.serve(sockets)
    except SystemExit:  # uvicorn could not bind (it has logged why)
        raise CliError(
            f"cannot listen on {args.host}:{args.port} (in use, or not an address of this machine)"
        ) from None
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
        if stopping:
            await stopping[0]
        else:
            await daemon.stop(args.grace)
    sys.stderr.write("pagemind: stopped\n")
    return 0


class _Server:
    """uvicorn's server, with the caller's signal handling and a hook once it listens."""

    def __new__(cls, config: Any, on_started: Callable[[Any], None]) -> Any:
        import uvicorn

        class Server(uvicorn.Server):
            @contextlib.contextmanager
            def capture_signals(self) -> Iterator[None]:  # the caller handles the signals
                yield

            async def startup(self, sockets: list[socket.socket] | None = None) -> None:
                await super().startup(sockets)
                if self.started:
                    on_started(self)

        return Server(config)


def tell_supervisor(ready_fd: int | None) -> None:
    """A worker of `serve --workers` says it listens (`scheduler.workers`): one byte on the pipe it was given."""
    if ready_fd is None:
        return
    import os

    with contextlib.suppress(OSError):  # the supervisor is gone: nobody to tell
        os.write(ready_fd, b"1")
    with contextlib.suppress(OSError):
        os.close(ready_fd)


def serving_loop() -> asyncio.AbstractEventLoop:
    """The daemon's event loop: uvloop's where it is installed (every platform but Windows), else asyncio's. Its
    sockets, transports and timers are C: the daemon spent ×0.89–0.94 of the CPU per step on it
    (`bench/RESULTS.md`, "Daemon CPU per step, fifth pass")."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def report_unloaded(catalog: AgentCatalog) -> None:
    """Tell the user, on stderr and before anything else, which files of the folder will not be served and why,
    one line each (the log has them too, but a log is not where someone starting `serve` looks)."""
    for line in catalog.folder.problems():
        sys.stderr.write(f"pagemind: not serving {line}\n")
    sys.stderr.flush()


def load_before_serving(catalog: AgentCatalog) -> None:
    """What the first turn would load, loaded before the daemon listens: its first user would otherwise wait for
    it (the SDK's ~800 modules 0.7 s, a tiktoken encoding 0.2 s of CPU here), and the collector's freeze at start
    (`scheduler.gc_tuning`) would miss it, so every full collection would walk it again."""
    from pagemind.runtime.model.pool import import_model_stack
    from pagemind.runtime.process.settings import Settings
    from pagemind.runtime.tokens import DEFAULT_ENCODING, encoding

    import_model_stack(Settings.read("http_client") or "httpx")
    for name in {spec.model.encoding or DEFAULT_ENCODING for spec in catalog.folder.specs()} or {DEFAULT_ENCODING}:
        encoding(name)


def public_url(args: argparse.Namespace) -> str:
    """The URL the daemon is reached at: `--public-url`, or http://HOST:PORT."""
    return args.public_url or f"http://{_url_host(args.host)}:{args.port}"


def _reuse_port_socket(host: str, port: int) -> socket.socket:
    """A socket bound with `SO_REUSEPORT`, as each worker of `serve --workers` binds (`scheduler.workers`): the
    kernel spreads the connections over the workers. Raises `CliError` when the port is taken otherwise."""
    from pagemind.runtime.cli.shared import CliError

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise CliError(f"cannot listen on {host}:{port}: {exc}") from None
    return sock


def _url_host(host: str) -> str:
    if host in ("0.0.0.0", "::", ""):
        return socket.gethostname()
    return f"[{host}]" if ":" in host else host


def claim_archival_store(catalog: AgentCatalog, settings: Settings) -> None:
    """Open the embedded archival store before serving when an agent of the folder keeps archival memory. It has
    one writer process: opened at the first turn that needs it, a command run beside the daemon meanwhile could
    take it, and the daemon's turns would then fail; held from the start, such a command is told to go through
    the daemon (`pagemind.runtime.cli.held_store`). A Qdrant server (`QDRANT_URL`) is shared: nothing to claim."""
    from pagemind.runtime.memory.wiring import ARCHIVAL_TOOLS, backend_opener, shared_embedder

    if settings.qdrant_url or not any(ARCHIVAL_TOOLS & set(spec.tools) for spec in catalog.folder.specs()):
        return
    from pagemind.runtime.cli.shared import CliError
    from pagemind.runtime.memory.vectors.records import StoreLocked

    try:
        backend_opener(settings, shared_embedder(settings, catalog.store.engine))()
    except StoreLocked as exc:
        raise CliError(f"{exc} The daemon did not start.", code=3) from None
