"""structlog set-up: every event goes to stderr, at the level PAGEMIND_LOG_LEVEL names (default WARNING).

Importing this module configures structlog unless the application already did (`structlog.is_configured()`):
structlog's own default prints every event, at every level, on stdout, and a library must never write there.
The state engine, which every library path goes through to open its database, imports this one, so
`from pagemind.runtime import Agent` is quiet on stdout without any set-up by the caller (the kernel base modules
may not import each other). The CLI calls `configure_logging()` itself and reports a bad level as an error.
"""

from __future__ import annotations

import logging
import sys

import structlog

from pagemind.runtime.process.settings import Settings

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


class LogLevelError(ValueError):
    """PAGEMIND_LOG_LEVEL names no level."""


def level_number(level: str | None = None) -> int:
    """The numeric level for `level` (or PAGEMIND_LOG_LEVEL, default WARNING); raises LogLevelError if unknown."""
    name = (level or Settings.read("log_level") or "WARNING").strip().upper()
    if name not in LEVELS:
        raise LogLevelError(
            f"PAGEMIND_LOG_LEVEL={name.lower()!r} is not a level; use one of {', '.join(n.lower() for n in LEVELS)}"
        )
    number: int = logging.getLevelName(name)  # a name in LEVELS: its number
    return number


def configure_logging(level: str | None = None) -> None:
    """Route structlog events to stderr: JSON lines when stderr is not a terminal, readable lines when it is.
    `level` (else PAGEMIND_LOG_LEVEL, default WARNING) picks the level; raises LogLevelError if it names none."""
    number = level_number(level)
    renderer = (
        structlog.dev.ConsoleRenderer(colors=False) if sys.stderr.isatty() else structlog.processors.JSONRenderer()
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(number),
        # Resolved at each write, not bound now: a test (or an application) that swaps sys.stderr still gets them.
        logger_factory=_StderrLoggerFactory(),
        cache_logger_on_first_use=False,
    )


class _StderrLoggerFactory:
    """PrintLogger on whatever sys.stderr is when a logger is made (never stdout)."""

    def __call__(self, *args: object) -> structlog.PrintLogger:
        return structlog.PrintLogger(file=sys.stderr)


def ensure_configured() -> None:
    """Configure structlog for library use unless the application configured it; a bad PAGEMIND_LOG_LEVEL falls
    back to WARNING with one warning (an import must not fail on it)."""
    if structlog.is_configured():
        return
    try:
        configure_logging()
    except LogLevelError as exc:
        configure_logging("WARNING")
        structlog.get_logger("pagemind.logs").warning("bad_log_level", error=str(exc))


ensure_configured()
