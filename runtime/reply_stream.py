"""The reply as it is written: the fragments of a streamed step (`runtime.model.stream`) turned into `ReplyDeltaEvent`s
for whoever watches the turn, and `ReplyResetEvent`s when text already handed out turns out not to be the reply.

Agents reply MemGPT-style, through a terminal tool's call (`send_message(message=…)`), so the reply's tokens arrive
inside the call's JSON arguments, a few characters at a time. `JsonStringField` reads the top-level `message` string
out of that partial JSON as it grows: escapes and `\\uXXXX` (surrogate pairs too) decoded, whatever the chunk
boundaries. A model that answers in plain content has its content streamed instead.

What the watcher holds is always a prefix of the reply, or is reset: content followed by a tool call was the model's
note, not the reply (reset); a second reply call replaces the first (reset); a failed attempt's text is void (reset,
then the retry streams again); and the loop resets a streamed step that did not end the turn with that text.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pagemind.runtime.events import ReplyDeltaEvent, ReplyResetEvent
from pagemind.runtime.observer import TurnObserver

REPLY_ARGUMENT = "message"  # the argument of a terminal tool that holds the reply (send_message's)

_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


@dataclass
class JsonStringField:
    """The value of one top-level string field of a JSON object, decoded incrementally from fragments of the
    object's text. `feed` returns the newly decoded characters of the field; `restarted` turns True when the field
    appears a second time (JSON's last value wins, so what was returned before is void)."""

    key: str = REPLY_ARGUMENT
    depth: int = 0
    in_string: bool = False
    escape: str | None = None  # the escape being read: "" after a backslash, then "uXXXX" as it grows
    high_surrogate: str = ""
    expecting_value: bool = False  # after the field's key and its colon, before its value
    in_value: bool = False
    seen: int = 0  # times the field's value has started
    restarted: bool = False
    _key: list[str] | None = None  # the top-level key being read (None: not reading a key)
    _last_key: str | None = None

    def feed(self, fragment: str) -> str:
        """The field's characters decoded from `fragment` (the next piece of the object's text)."""
        out: list[str] = []
        for char in fragment:
            if self.in_string:
                self._string_char(char, out)
            elif char == '"':
                self.in_string = True
                if self.depth == 1 and self.expecting_value and self._last_key == self.key:
                    self.in_value, self.expecting_value = True, False
                    self.seen += 1
                    self.restarted = self.seen > 1
                elif self.depth == 1 and not self.expecting_value:
                    self._key = []
            elif char in "{[":
                self.depth += 1
                self.expecting_value = False
            elif char in "}]":
                self.depth -= 1
            elif char == ":" and self.depth == 1:
                self.expecting_value = True
            elif char == "," and self.depth == 1:
                self.expecting_value, self._last_key = False, None
            elif not char.isspace():
                self.expecting_value = False  # a number, true, false or null: not a string
        return "".join(out)

    def _string_char(self, char: str, out: list[str]) -> None:
        if self.escape is not None:
            self._escaped(char, out)
        elif char == "\\":
            self.escape = ""
        elif char == '"':
            self.in_string = False
            if self._key is not None:
                self._last_key, self._key = "".join(self._key), None
            self.in_value = False
        elif self._key is not None:
            self._key.append(char)
        elif self.in_value:
            self._emit(char, out)

    def _escaped(self, char: str, out: list[str]) -> None:
        assert self.escape is not None
        if self.escape == "" and char != "u":
            self.escape = None
            decoded = _ESCAPES.get(char, char)
            if self._key is not None:
                self._key.append(decoded)
            elif self.in_value:
                self._emit(decoded, out)
            return
        self.escape += char
        if len(self.escape) < 5:
            return
        try:
            decoded = chr(int(self.escape[1:], 16))
        except ValueError:
            decoded = ""  # not JSON: the arguments will fail to parse and the loop resets the streamed text
        self.escape = None
        if self._key is not None:
            self._key.append(decoded)
        elif self.in_value:
            self._emit(decoded, out)

    def _emit(self, char: str, out: list[str]) -> None:
        if self.high_surrogate:  # the first half of a pair waits for the second
            high, self.high_surrogate = self.high_surrogate, ""
            if "\udc00" <= char <= "\udfff":
                out.append(chr(0x10000 + ((ord(high) - 0xD800) << 10) + (ord(char) - 0xDC00)))
                return
        if "\ud800" <= char <= "\udbff":
            self.high_surrogate = char
            return
        if not "\udc00" <= char <= "\udfff":  # a lone half cannot be shown (nor encoded): dropped
            out.append(char)


@dataclass
class ReplyStream:
    """The `DeltaSink` of one streamed step: reports the reply's text as `ReplyDeltaEvent`s (and resets) to the
    observer. `reply_tools` are the names of the tools whose `message` argument is the reply (the terminal ones).
    `text` is what the watcher holds now."""

    observer: TurnObserver
    step: int
    reply_tools: frozenset[str]
    text: str = ""
    source: tuple[str, int] | None = None  # ("content", 0) or ("tool", call index): where the text comes from
    fields: dict[int, JsonStringField] = field(default_factory=dict)
    called: bool = False  # a tool call has begun: content is no longer the reply

    def content(self, text: str) -> None:
        """Stream the assistant's content, unless a tool call already started (content then is no reply)."""
        if not self.called:
            self._delta(("content", 0), "content", text)

    def tool_arguments(self, index: int, name: str, fragment: str) -> None:
        """Stream the `message` of a reply tool's call; any tool call voids content streamed before it."""
        if not self.called:
            self.called = True
            if self.source == ("content", 0):
                self.reset("the model's text came with a tool call: it was not the reply")
                self.source = None
        if name not in self.reply_tools:
            return
        reader = self.fields.setdefault(index, JsonStringField())
        decoded = reader.feed(fragment)
        if reader.restarted:
            reader.restarted = False
            if self.source == ("tool", index):
                self.reset("the reply's field came twice: the last one counts")
        if decoded:
            self._delta(("tool", index), name, decoded)

    def _delta(self, source: tuple[str, int], label: str, text: str) -> None:
        if self.source is not None and self.source != source:
            self.reset("another reply call replaces this one")
        self.source = source
        self.text += text
        self.observer.on_event(ReplyDeltaEvent(step=self.step, source=label, text=text))

    def discard(self, reason: str) -> None:
        """The attempt failed: what it streamed is void (the call may be retried and stream again)."""
        self.fields.clear()
        self.reset(reason)
        self.source, self.called = None, False

    def reset(self, reason: str) -> None:
        """Tell the watcher to drop what it holds (nothing is said when it holds nothing)."""
        if self.text:
            self.observer.on_event(ReplyResetEvent(step=self.step, reason=reason))
        self.text = ""
