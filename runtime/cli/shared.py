"""What every CLI command shares: the user-facing error, output, and finding an agent's spec.

Imported by the entry point and by each command module (never the other way round), so it imports nothing at
module level beyond the standard library: `pagemind --help` must not pay for SQL or the model SDK.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pagemind.runtime.process.settings import Settings
    from pagemind.runtime.spec.agent import AgentSpec
    from pagemind.runtime.state.store import StateStore


class CliError(Exception):
    """A user-facing error: printed without a traceback, exit code 2 unless given."""

    def __init__(self, message: str, code: int = 2):
        super().__init__(message)
        self.code = code


SHOWN_CHARS = 2000  # the most of one stored text a listing prints; the rest is counted, not shown


def clip(text: str, limit: int = SHOWN_CHARS) -> str:
    """`text`, or its first `limit` characters and a note of how much was left out (a 200 KB message would
    otherwise flood the terminal)."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… [{len(text) - limit:,} more characters not shown; {len(text):,} in all]"


# C0 controls but tab and newline, DEL, and C1 controls: what a terminal acts on (ESC starts a sequence; C1 CSI and
# OSC do the same on some terminals) instead of showing.
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def terminal_safe(text: str) -> str:
    """`text` with every control character a terminal would act on shown as `\\xNN` instead: stored text (a
    block, a message, a trace someone shared) can then neither retitle nor clear the terminal. Tab and newline
    stay."""
    return _CONTROLS.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def out(text: str = "") -> None:
    """What the CLI shows the user (output, not logging); control characters neutralised (`terminal_safe`)."""
    sys.stdout.write(terminal_safe(text) + "\n")


def add_wait(parser: argparse.ArgumentParser, what: str = "a turn") -> None:
    """The `--wait SECONDS` option: how long a command waits for what another process holds."""
    parser.add_argument(
        "--wait",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help=f"how long {what} waits while another process runs a turn of the same agent or has its archival "
        "store open, before exiting 3 (busy) with nothing stored (default 30)",
    )


def notice(text: str) -> None:
    """A one-line note for the user beside a command's output (stderr, so that piped output stays clean)."""
    sys.stderr.write(f"note: {terminal_safe(text)}\n")


# `user:password@` in a URL (OPENAI_BASE_URL may carry a gateway's credentials): never shown in an error.
_PASSWORD = re.compile(r"(?<=://)([^/\s@:]+):[^/\s@]+@")


def without_credentials(text: str) -> str:
    """`text` with the password of every URL in it shown as `***` (`user:***@`, as the database's errors say)."""
    return _PASSWORD.sub(r"\1:***@", text)


def error_line(text: str) -> None:
    """An error for the user on stderr (`error: …`): no URL's credentials, control characters neutralised as `out`
    does."""
    sys.stderr.write(f"error: {terminal_safe(without_credentials(text))}\n")


def open_store(settings: Settings) -> StateStore:
    """The state database named by the settings, with any purge a kill cut short finished first."""
    from pagemind.runtime.crypto.keys import Encryption
    from pagemind.runtime.state.store import StateStore

    store = StateStore.open(settings.database_url, Encryption.of(settings))
    finish_purges(store, settings)
    return store


def finish_purges(store: StateStore, settings: Settings) -> None:
    """Finish the purges a kill cut short (`runtime.erasure`; one read when there is none). A vector store held by
    another process (a daemon serving: it finishes them when it starts next) leaves them for later, said once."""
    from pagemind.runtime.erasure.record import any_pending

    if not any_pending(store.engine):
        return
    import structlog

    from pagemind.runtime.erasure.purge import resume_purges  # the vector stores' code: only when there is work
    from pagemind.runtime.memory.vectors.records import StoreError

    try:
        resume_purges(store.engine, settings)
    except StoreError as exc:
        structlog.get_logger("pagemind.erasure").warning("purge_not_resumed", detail=str(exc))


def resolve_spec(target: str, store: StateStore, *, tools: bool = True) -> AgentSpec:
    """An agent by YAML path, or by name from the database. `tools=False`: a stored agent's custom tools are not
    imported (a command that shows its memory needs none, and their module may be found only beside its YAML)."""
    from pydantic import ValidationError

    from pagemind.runtime.spec.agent import AgentSpec
    from pagemind.runtime.spec.loading import load_spec

    path = Path(target)
    if path.suffix in {".yaml", ".yml"} or path.exists():
        return load_spec(path)
    stored = store.stored_spec_json(target)
    if stored is None:
        raise CliError(f"no agent file or stored agent called '{target}' (see `pagemind agents`)")
    try:
        return AgentSpec.model_validate_json(stored, context=None if tools else {"trust": "shared"})
    except ValidationError as exc:
        first = exc.errors()[0]
        where = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in first["loc"]).lstrip(".")
        raise CliError(
            f"stored agent '{target}' cannot be loaded by its name here ({where}: {first['msg']}); "
            "give its YAML file instead of the name"
        ) from None
