"""`pagemind privacy scan`: personal data found and redacted in text lines, for operators and tests.

    printf 'call me at 138 0013 8000\\n' | pagemind privacy scan
    {"text": "call me at [phone#1]", "spans": [{"start": 11, "end": 24, "kind": "phone"}]}

One JSON line per input line: the line redacted as an agent with every kind on would store it (placeholders
numbered across the whole input: the same value gets the same number), and each match as character offsets into
the input line (without its line break). `--kinds phone,email` scans for those kinds only; every kind, street
addresses included, by default. Nothing is read from or written to the state folder.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
from typing import TYPE_CHECKING, Any

from pagemind.runtime.cli.shared import CliError

if TYPE_CHECKING:
    from pagemind.runtime.process.settings import Settings

# The recognisers' kinds (`runtime.privacy.recognisers.KINDS`), listed here so `--help` imports nothing more.
KINDS = ("phone", "email", "card", "cn_id", "passport", "iban", "ip", "address")


def add_parser(sub: Any) -> None:
    """Add `privacy` (its subcommand `scan`) to the CLI's subparsers."""
    privacy = sub.add_parser("privacy", help="personal data in text: `privacy scan` redacts lines read on stdin")
    privacy.add_argument("action", choices=["scan"], help="scan: one JSON line per input line (text, spans)")
    privacy.add_argument(
        "--kinds",
        default=",".join(KINDS),
        metavar="K1,K2",
        help=f"the kinds to find, comma-separated (default: all: {','.join(KINDS)})",
    )
    privacy.set_defaults(handler=cmd_privacy)


def chosen_kinds(text: str) -> tuple[str, ...]:
    """The kinds named in `--kinds`; raises CliError for one that is not a kind."""
    kinds = tuple(dict.fromkeys(k.strip() for k in text.split(",") if k.strip()))
    unknown = [k for k in kinds if k not in KINDS]
    if unknown or not kinds:
        raise CliError(f"--kinds: unknown kind {', '.join(unknown) or '(none given)'}; kinds are {', '.join(KINDS)}")
    return kinds


async def cmd_privacy(args: argparse.Namespace, settings: Settings) -> int:
    """`privacy scan`: redact stdin line by line onto stdout."""
    import secrets

    from pagemind.runtime.privacy.book import PlaceholderBook
    from pagemind.runtime.privacy.redactor import redact

    kinds = chosen_kinds(args.kinds)
    book = PlaceholderBook(secrets.token_bytes(32))  # numbering for this input only, kept in memory
    lines = io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="replace", newline="")
    out = io.TextIOWrapper(sys.stdout.buffer, encoding="utf-8", newline="\n", write_through=False)
    for raw in lines:
        line = raw.removesuffix("\n").removesuffix("\r")
        result = redact(line, kinds, book)
        spans = [{"start": s.start, "end": s.end, "kind": s.kind} for s in result.spans]
        out.write(json.dumps({"text": result.text, "spans": spans}, ensure_ascii=False) + "\n")
    out.flush()
    out.detach()
    lines.detach()
    return 0
