"""The `pagemind` command line: the parser and the dispatch of init, run, chat, memory, context, agents, trace,
replay, demo, reflect, models, keys, privacy, mcp, export, import; and the notes that say where state lives when
PAGEMIND_HOME does not.

Start-up is part of the interface: this module and the command modules it imports load only the standard
library, and each command imports what it needs when it runs, so `pagemind --help` pays for no SQL, model SDK,
tokenizer or vector store (tests/runtime/cli/test_cli_startup.py checks it; bench/cli_startup.py measures it).
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pagemind.runtime.cli import commands
from pagemind.runtime.cli.admin.keys import add_parser as add_keys_parser
from pagemind.runtime.cli.admin.models import add_parser as add_models_parser
from pagemind.runtime.cli.bridges.mcp import add_parser as add_mcp_parser
from pagemind.runtime.cli.bridges.porting import add_parsers as add_porting_parsers
from pagemind.runtime.cli.errors import bad_argument, exit_code
from pagemind.runtime.cli.init import add_parser as add_init_parser
from pagemind.runtime.cli.memory import is_memory_subcommand, memory_parser
from pagemind.runtime.cli.privacy import add_parser as add_privacy_parser
from pagemind.runtime.cli.reflect import add_parser as add_reflect_parser
from pagemind.runtime.cli.shared import CliError, add_wait, notice
from pagemind.runtime.cli.trace import add_parsers as add_trace_parsers


def configure_logging() -> None:
    """Route structlog to stderr (imported here, not at module level: help and parse errors need no logging); a
    PAGEMIND_LOG_LEVEL that names no level is a configuration error (exit 2)."""
    from pagemind.runtime.process.settings import Settings

    level = (Settings.read("log_level") or "WARNING").strip().upper()
    if level not in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"):
        # Checked before the import: importing the module configures library logging, which would warn as well.
        raise CliError(
            f"PAGEMIND_LOG_LEVEL={level.lower()!r} is not a level; use one of debug, info, warning, error, critical"
        )
    from pagemind.runtime.process.logs import configure_logging as configure

    configure(level)


Extend = Callable[[Any], None]
"""Adds commands to the parser: called with its subparsers (`argparse._SubParsersAction`) once the runtime's own
are in, so a layer above the runtime (the daemon's `serve`, `send`) can add commands or wrap a handler."""


# Commands that read and write no state under the home folder (the demo keeps its own, in a temporary folder).
STATELESS = frozenset({"init", "demo", "privacy"})
GENERIC_HOME = (
    "$PAGEMIND_HOME; when unset, a ./.pagemind the current folder has, else the user data folder "
    "(~/.local/share/pagemind on Linux)"
)


def state_epilog(where: str) -> str:
    """The help's closing line: where state lives (`where`: the folder, or for the docs how it is chosen)."""
    return (
        f"State (the database, archival vectors, traces) lives in {where}. "
        "Start with `pagemind init` (example agents) or `pagemind demo`."
    )


def build_parser(extend: Extend | None = None) -> argparse.ArgumentParser:
    """The argument parser (exposed for tests and docs); `extend` adds a higher layer's commands. Its epilog says
    how the state folder is chosen; `main` names the folder itself."""
    parser = argparse.ArgumentParser(
        prog="pagemind", description="A virtual-context OS for LLM agents.", epilog=state_epilog(GENERIC_HOME)
    )
    sub = parser.add_subparsers(dest="command", required=True)
    add_init_parser(sub)
    run = sub.add_parser("run", help="send one message and print the reply")
    run.add_argument("agent", help="agent YAML file or stored agent name")
    run.add_argument("-m", "--message", required=True)
    run.add_argument("--reset-memory", action="store_true", help="re-seed core blocks from the YAML")
    run.add_argument(
        "--idempotency-key",
        metavar="KEY",
        help="the same key again returns the first turn's reply and stores nothing new "
        "(a turn a crash interrupted is completed)",
    )
    add_wait(run)
    run.set_defaults(handler=commands.cmd_run)
    chat = sub.add_parser("chat", help="interactive conversation")
    chat.add_argument("agent")
    chat.add_argument("--reset-memory", action="store_true")
    add_wait(chat)
    chat.set_defaults(handler=commands.cmd_chat)
    memory = sub.add_parser(
        "memory",
        help="core blocks with chars/limit and edit history; "
        "also `memory search|archival|forget AGENT …` for external memory",
    )
    memory.add_argument("agent")
    memory.add_argument("--history", nargs="?", const="*", help="list edits (of one block, or all)")
    memory.set_defaults(handler=commands.cmd_memory)
    context = sub.add_parser("context", help="the compiled prompt and its tokens per section")
    context.add_argument("agent")
    context.add_argument("--json", action="store_true")
    context.set_defaults(handler=commands.cmd_context)
    agents = sub.add_parser(
        "agents",
        help="list stored agents; `agents rename OLD NEW` renames one; `agents assign NAME --user U` gives one to an "
        "end user; `agents purge NAME` erases one",
    )
    agents.add_argument(
        "action",
        nargs="?",
        choices=["rename", "assign", "purge"],
        help="rename a stored agent (its memory follows), assign it to an end user (its user keys reach it), or "
        "purge one: every row, memory, vector and trace of it",
    )
    agents.add_argument("names", nargs="*", metavar="NAME")
    agents.add_argument("--user", metavar="U", help="assign: the end user (`--user ''`: nobody, admin keys only)")
    agents.set_defaults(handler=commands.cmd_agents)
    add_trace_parsers(sub)  # trace ls|show|export, replay, demo; --trace on run and chat
    add_reflect_parser(sub)
    add_models_parser(sub)
    add_keys_parser(sub)
    add_mcp_parser(sub)
    add_porting_parsers(sub)  # export, import
    add_privacy_parser(sub)
    if extend is not None:
        extend(sub)
    return parser


def announce_home(command: str | None) -> Path | None:
    """Say where state is when PAGEMIND_HOME does not: a ./.pagemind of the current folder in use (said now), or
    the user data folder not made yet (returned, to be announced once the command has made it)."""
    from pagemind.runtime.process.home import find_home, user_home

    if command in STATELESS:
        return None
    home = find_home()
    if home.origin == "local":
        notice(
            f"using {home.path}, found in this folder, for pagemind's state; to use the same state from any folder, "
            f"move it to {user_home()} or set PAGEMIND_HOME={home.path}"
        )
    elif home.origin == "user" and not home.path.exists():
        return home.path
    return None


def main(argv: Sequence[str] | None = None, *, extend: Extend | None = None) -> int:
    """Entry point of the runtime's commands (`argv` None: the process's own arguments, and the process ends when
    this returns); the `pagemind` console script is `pagemind.scheduler.cli:main`, which adds the daemon's."""
    process_ends = argv is None
    argv = list(sys.argv[1:] if argv is None else argv)
    bad = bad_argument(argv)
    if bad:
        sys.stderr.write(f"error: {bad}; pagemind stores text as UTF-8\n")
        return 2
    if is_memory_subcommand(argv):
        parser = memory_parser()
    else:
        from pagemind.runtime.process.home import describe, find_home  # stdlib and platformdirs only

        parser = build_parser(extend)
        parser.epilog = state_epilog(describe(find_home()))
    args = parser.parse_args(argv)
    import asyncio  # after parsing: --help and usage errors exit above without an event loop

    made: Path | None = None
    try:
        configure_logging()
        from pagemind.runtime.process.settings import Settings

        settings = Settings.from_env()
        made = announce_home(getattr(args, "command", None))
        # A command may bring its own event loop (`serve`: uvloop); the others run on asyncio's.
        with asyncio.Runner(loop_factory=getattr(args, "loop_factory", None)) as runner:
            code: int = runner.run(args.handler(args, settings))
        sys.stdout.flush()  # here, not at exit, so that a reader who left (below) is no error
        return code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `pagemind context AGENT | head`: the reader left, nothing is wrong
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # nothing left to flush at exit either
        return 0
    except Exception as exc:
        return exit_code(exc)
    finally:
        if made is not None and made.is_dir():
            notice(
                f"created {made} for pagemind's state (agents, memory, traces); set PAGEMIND_HOME to keep it elsewhere"
            )
        if process_ends:
            # The interpreter's last garbage collection walks every object the command created (the SDK's types,
            # SQL metadata, tokenizer tables): half a second for a run. Frozen objects are skipped; atexit handlers
            # still run, and nothing here relies on a cycle's finalizer at exit (Python does not promise those).
            gc.freeze()


if __name__ == "__main__":
    # `python -m pagemind.runtime.cli.main`. CliError lives in cli.shared, so the commands raise the very class this
    # copy of the module catches.
    sys.exit(main())
