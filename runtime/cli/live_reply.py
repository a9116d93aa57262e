"""The reply printed as it is written: an observer that writes each `ReplyDeltaEvent`'s text to stdout as it
arrives, for `run` and `chat` (and, fed from the daemon's `reply_delta` / `reply_reset` SSE, for `send --server`).

Only when stdout is a terminal (`stdout_is_terminal`): piped or redirected, the CLI prints the whole reply once,
exactly as it did before streaming existed, and the model is asked for the plain, non-streamed answer.

A reset (`ReplyResetEvent`: a failed attempt that is retried, a note the model wrote before calling a tool, a step
that did not end the turn) cannot unprint what a terminal shows, so it ends the line and prints `RESET_MARKER` on
its own line; the next text starts a fresh line (with the prefix again). The final reply is authoritative: when
what was printed since the last reset is not exactly it, the reply is printed in full on a new line.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, TextIO

from pagemind.runtime.cli.shared import terminal_safe

if TYPE_CHECKING:
    from pagemind.runtime.events import Event

RESET_MARKER = "(draft discarded)"


def stdout_is_terminal() -> bool:
    """Whether stdout is a terminal (only then is the reply shown as it is written)."""
    try:
        return sys.stdout.isatty()
    except (AttributeError, ValueError):  # a closed or replaced stream
        return False


class LiveReply:
    """Writes the reply's pieces as they come, after `prefix` (e.g. `"alice> "` in `chat`); `finish` ends the
    reply with the final text. `stream` None: whatever `sys.stdout` is at the time of writing."""

    wants_deltas = True  # runtime.observer: ask the model to stream

    def __init__(self, prefix: str = "", stream: TextIO | None = None):
        self.prefix = prefix
        self.stream = stream
        self.shown = ""  # the text printed since the last reset
        self.open = False  # a line of streamed text is printed and not yet ended

    def _write(self, text: str) -> None:
        stream = self.stream or sys.stdout
        stream.write(terminal_safe(text))  # the model's text, as `out` shows every other
        stream.flush()

    def on_event(self, event: Event | Any) -> None:
        """Print a delta; mark a reset; ignore every other event."""
        from pagemind.runtime.events import ReplyDeltaEvent, ReplyResetEvent

        if isinstance(event, ReplyDeltaEvent):
            self.delta(event.text)
        elif isinstance(event, ReplyResetEvent):
            self.reset()

    def delta(self, text: str) -> None:
        """Print the next piece of the reply (the prefix first, when it starts a line)."""
        if not text:
            return
        if not self.open:
            self._write(self.prefix)
            self.open = True
        self._write(text)
        self.shown += text

    def reset(self) -> None:
        """What was printed is not the reply: end its line and print the marker (nothing when nothing was shown)."""
        if self.open:
            self._write(f"\n{RESET_MARKER}\n")
        self.shown, self.open = "", False

    def finish(self, reply: str) -> None:
        """End the reply: a newline when what was streamed is `reply`, else `reply` in full on its own line."""
        if self.open and self.shown == reply:
            self._write("\n")
        else:
            self._write(("\n" if self.open else "") + f"{self.prefix}{reply}\n")
        self.shown, self.open = "", False

    def abandon(self) -> None:
        """The turn failed: end the line of streamed text, if one is open, so what follows starts a line."""
        if self.open:
            self._write("\n")
        self.shown, self.open = "", False


def watch(agent: Any, prefix: str = "") -> LiveReply | None:
    """Show `agent`'s replies as they are written (alongside its observer) when stdout is a terminal; None
    otherwise, and the agent is left as it was."""
    if not stdout_is_terminal():
        return None
    from pagemind.runtime.observer import joined

    live = LiveReply(prefix)
    agent.observer = joined(agent.observer, live)
    return live
