"""How the CLI reports a failure: one line (a few for an agent definition's problems), never a traceback, and the
exit code: 0 ok, 1 model failure or replay divergence, 2 bad input or configuration, 3 agent busy.

Standard library only at module level (the entry point imports it before parsing); kernel error classes are
looked up in `sys.modules`: an error of a kernel kind means its module is loaded already.
"""

from __future__ import annotations

import sys

from pagemind.runtime.cli.shared import CliError, error_line

_CONFIGURATION_ERRORS = (
    ("pagemind.runtime.process.settings", "SettingsError"),
    ("pagemind.runtime.state.engine", "DatabaseOpenError"),
    ("pagemind.runtime.crypto.keys", "EncryptionKeyError"),  # a malformed key, a sealed value without its key
    ("pagemind.runtime.state.migrate", "SchemaTooNew"),
    ("pagemind.runtime.trace.replay", "ReplayError"),
    ("pagemind.runtime.memory.vectors.records", "StoreError"),  # a bad or unreachable QDRANT_URL (held: exit 3)
)


def _is_configuration_error(exc: Exception) -> bool:
    """Whether `exc` is one of the kernel's bad-input or configuration errors (its message is for the user)."""
    for module_name, class_name in _CONFIGURATION_ERRORS:
        module = sys.modules.get(module_name)
        if module is not None and isinstance(exc, getattr(module, class_name)):
            return True
    return False


def with_endpoint(exc: BaseException) -> str:
    """A model error's message, naming the URL it was sent to when the message does not (the SDK's error that
    caused it carries the request)."""
    request = getattr(exc.__cause__, "request", None)
    url = getattr(request, "url", None)
    text = str(exc)
    if not url or str(url) in text:
        return text
    shown = str(url).split("?", 1)[0]  # a gateway may take its key as a query parameter (`error_line` drops user:pw@)
    return f"{text} (endpoint {shown})"


def bad_argument(argv: list[str]) -> str | None:
    """The first argument that is not valid UTF-8 (Python keeps its bytes as lone surrogates), described."""
    for index, arg in enumerate(argv, start=1):
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError as exc:
            byte = ord(arg[exc.start]) & 0xFF
            return f"argument {index} is not valid UTF-8 (byte {byte:#04x} at position {exc.start})"
    return None


def exit_code(exc: Exception) -> int:
    """Report an error in one line (a few for an agent definition's problems), never a traceback, and return its
    exit code: 1 model failure, 2 bad input or configuration, 3 agent busy (a CliError carries its own)."""
    # An error of a kernel kind means its module is loaded already: look it up instead of importing it (an import
    # here would configure library logging, or worse, fail).
    spec = sys.modules.get("pagemind.runtime.spec.loading")
    model_client = sys.modules.get("pagemind.runtime.model.client")
    if spec is not None and isinstance(exc, spec.SpecError):
        error_line(f"invalid agent definition\n{exc}")
        return 2
    if type(exc).__name__ in {"AgentBusy", "StaleBlocks", "IdempotencyKeyReused"}:
        # Raised only once the state store (and the loop) are loaded; matched by name so this error path imports
        # nothing. Busy and stale are both another process's turn in the way: exit 3; a reused key is bad input.
        error_line(f"{exc}")
        return 2 if type(exc).__name__ == "IdempotencyKeyReused" else 3
    if model_client is not None and isinstance(exc, model_client.NoModelConfigured):
        error_line(f"{exc}")
        return 2  # configuration, not a model failure
    if model_client is not None and isinstance(exc, model_client.ModelError):
        error_line(f"{with_endpoint(exc)}")
        return getattr(exc, "code", 1)
    if isinstance(exc, CliError):
        error_line(f"{exc}")
        return exc.code
    if _is_configuration_error(exc):
        error_line(f"{exc}")
        return 2
    if isinstance(exc, FileExistsError):
        error_line(f"{exc.filename} already exists (traces are never overwritten); choose another path")
        return 2
    if isinstance(exc, UnicodeError):
        error_line(f"text that is not valid UTF-8: {exc}")
        return 2
    # A bug, not the user's doing: one line that says so; the traceback goes to the log at debug level.
    first = str(exc).splitlines()[0][:300] if str(exc) else ""
    error_line(
        f"unexpected {type(exc).__name__}: {first} (this is a bug in pagemind; "
        "PAGEMIND_LOG_LEVEL=debug shows the traceback)"
    )
    logs = sys.modules.get("pagemind.runtime.process.logs")
    if logs is not None:
        logs.structlog.get_logger("pagemind.cli").debug("unexpected_error", exc_info=exc)
    return 1
