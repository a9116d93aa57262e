"""Speaker labels: transcripts start each turn with who speaks ("Caroline: …"); ranking reads them, and a search's
second round leaves them out of the words it looks for."""

from __future__ import annotations

import re

# "Caroline: …", "Dr. Lin: …", "张伟：…": up to 3 words before a colon at the start of a message.
_LABEL = re.compile(r"^\s*([^\W\d_][\w.'’-]*(?: [\w.'’-]+){0,2})\s*[:：]\s", re.UNICODE)


def without_speaker(text: str) -> str:
    """The text without the speaker label it starts with ("Caroline: hi" → "hi")."""
    return _LABEL.sub("", text, count=1)


def speaker(text: str) -> str:
    """The speaker label a message starts with ("Caroline: hi" → "caroline"), lower-cased; "" when none."""
    match = _LABEL.match(text)
    return match[1].lower() if match else ""
