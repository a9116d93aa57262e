"""Named crash points: where the crash suites make a process kill itself, deterministically.

`crash_point("commit.before_commit")` kills the process with SIGKILL when the environment variable
`PAGEMIND_KILL_AT` names that point, as `NAME` (its first pass) or `NAME@N` (its Nth pass). The variable is read
once, at import; when it is unset `crash_point` is a function that returns at once, so the points cost one call
each in production. The names a suite can choose are the literal arguments of the calls
(`tests/crash/test_step_crash.py` lists them).
"""

from __future__ import annotations

import os
import signal

from pagemind.runtime.process.settings import Settings

_spec = Settings.read("kill_at") or ""  # at import: the points must cost nothing when it is unset
_name, _, _nth = _spec.partition("@")
_passes = 0


def _kill_when_named(name: str) -> None:
    global _passes
    if name != _name:
        return
    _passes += 1
    if _passes == int(_nth or 1):
        os.kill(os.getpid(), signal.SIGKILL)


def _never(name: str) -> None:
    return None


crash_point = _kill_when_named if _name else _never
crash_point.__doc__ = "Kill this process here if PAGEMIND_KILL_AT names this point (see the module docstring)."


def arm(spec: str) -> None:
    """Point the crash points at `spec` (`NAME` or `NAME@N`; "" for none) in a process forked from one that
    imported pagemind with PAGEMIND_KILL_AT set (to anything): a crash suite's zygote imports pagemind once, and each
    forked child arms its own point instead of importing everything again. Raises RuntimeError in a process that
    imported this module unarmed (its call sites hold the no-op)."""
    global _name, _nth, _passes
    if crash_point is not _kill_when_named:
        raise RuntimeError("crash points were imported unarmed: set PAGEMIND_KILL_AT before importing pagemind")
    _name, _, _nth = spec.partition("@")
    _passes = 0
