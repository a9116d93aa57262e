"""`pagemind export` and `pagemind import`: one agent with all of its memory, to a file and back.

    pagemind export AGENT -o FILE [--format jsonl|af] [--redact]   # jsonl: pagemind's own; af: a Letta agent file
    pagemind import FILE [--as NEW_NAME | --replace] [--allow-code]

`export` writes JSON Lines (`pagemind.agent`, every tier of memory) unless the file ends in `.af` or `--format af`
says a Letta agent file; `-o -` (or none) writes to stdout. It reads the agent under its turn lock (waiting up to
`--wait` seconds for a turn elsewhere), so the file never holds half a step. The file is written beside its final
name and renamed into place, readable by its owner only: it holds the agent's whole memory, in plain text.
`--redact` writes the same file with personal data replaced by typed placeholders (`porting.redaction`).
`import` reads either format, told apart by content, and prints what it made and what did not map. Imports only
the standard library until a command runs (`pagemind --help` stays light).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pagemind.runtime.cli.shared import CliError, add_wait, out

if TYPE_CHECKING:
    from pagemind.runtime.process.settings import Settings


def add_parsers(sub: Any) -> None:
    """Add `export` and `import` to the CLI's subparsers."""
    export = sub.add_parser("export", help="write one agent with all of its memory to a file (JSON Lines or Letta .af)")
    export.add_argument("agent", help="stored agent name")
    export.add_argument("-o", "--output", metavar="FILE", default="-", help="the file to write (default: stdout)")
    export.add_argument(
        "--format",
        choices=["jsonl", "af"],
        help="jsonl: pagemind's format, every tier of memory (default); af: a Letta agent file "
        "(blocks, messages, tools; no archival memory). Default from the file's name: .af means af",
    )
    export.add_argument(
        "--redact",
        action="store_true",
        help="replace personal data (phone numbers, e-mail addresses, cards, IDs, passports, IBANs, IPs, street "
        "addresses) in every text by typed placeholders ([phone#1]), numbered across the file",
    )
    add_wait(export, "the export")
    export.set_defaults(handler=cmd_export)
    imported = sub.add_parser(
        "import", help="make an agent from an export or a Letta agent file (.af), told apart by content"
    )
    imported.add_argument("file", help="a `pagemind export` file or a Letta agent file")
    names = imported.add_mutually_exclusive_group()
    names.add_argument("--as", dest="new_name", metavar="NEW_NAME", help="store the agent under this name")
    names.add_argument(
        "--replace", action="store_true", help="replace the agent of the same name (purged from every store)"
    )
    imported.add_argument(
        "--allow-code",
        action="store_true",
        help="allow the agent's spec to name custom tools or schemas by module (their code runs here): only for a "
        "file of your own",
    )
    imported.set_defaults(handler=cmd_import)


def export_format(args: argparse.Namespace) -> str:
    """The format asked for, or the one the output's name implies."""
    if args.format:
        return str(args.format)
    return "af" if str(args.output).lower().endswith(".af") else "jsonl"


async def cmd_export(args: argparse.Namespace, settings: Settings) -> int:
    """Write the agent's file; say where and how much."""
    from pagemind.runtime.cli.shared import open_store, without_credentials
    from pagemind.runtime.porting.export import UnknownAgentName
    from pagemind.runtime.porting.files import export_lines

    store = open_store(settings)
    fmt = export_format(args)
    record = store.get_agent(args.agent)
    if record is None:
        raise CliError(f"no stored agent is called '{args.agent}' (see `pagemind agents`)")
    try:
        # Under the turn lock: a turn elsewhere (a daemon's) is not half written into the file.
        async with store.turn_lock(record.id, args.wait, args.agent):
            pieces = list(export_lines(store, args.agent, "af" if fmt == "af" else "jsonl", redact=args.redact))
    except UnknownAgentName:  # renamed or purged meanwhile
        raise CliError(f"no stored agent is called '{args.agent}' (see `pagemind agents`)") from None
    if args.output == "-":
        for piece in pieces:
            sys.stdout.write(piece)
        return 0
    target = Path(args.output)
    partial = target.with_name(f".{target.name}.partial")
    try:
        descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with open(descriptor, "w", encoding="utf-8") as file:
            for piece in pieces:
                file.write(piece)
        os.replace(partial, target)
    except OSError as exc:
        partial.unlink(missing_ok=True)
        raise CliError(f"cannot write {target}: {without_credentials(str(exc))}") from None
    size = target.stat().st_size
    redacted = ", redacted" if args.redact else ""
    out(f"exported '{args.agent}' to {target} ({fmt}{redacted}, {size:,} bytes)")
    return 0


async def cmd_import(args: argparse.Namespace, settings: Settings) -> int:
    """Import the file's agents and print a report of each."""
    from pagemind.runtime.cli.shared import open_store
    from pagemind.runtime.porting.files import import_file
    from pagemind.runtime.porting.load import ImportRefused, NameTaken
    from pagemind.runtime.porting.records import FormatError

    path = Path(args.file)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc.strerror or exc}") from None
    store = open_store(settings)
    try:
        reports = import_file(
            store,
            settings,
            data,
            name=args.new_name,
            replace=args.replace,
            code="any" if args.allow_code else "shipped",
        )
    except NameTaken as exc:
        raise CliError(f"{exc}: pass --as NEW_NAME, or --replace to purge the one here first") from None
    except (FormatError, ImportRefused) as exc:
        raise CliError(f"{path}: {exc}") from None
    for report in reports:
        out(report_text(report))
    return 0


def report_text(report: Any) -> str:
    """An import's report for a person: the agent, counts, re-embedding, then one line per note."""
    shown = {kind: n for kind, n in report.counts.items() if n and kind != "origin"}  # origin: bookkeeping
    counts = ", ".join(f"{n} {kind.replace('_', ' ')}s" for kind, n in shown.items())
    verb = "replaced" if report.replaced else "imported"
    lines = [f"{verb} agent '{report.name}': {counts or 'no records'}"]
    if report.reembedded:
        lines.append(f"  archival memories embedded with this side's model: {report.reembedded}")
    lines.extend(f"  note: {note}" for note in report.notes)
    return "\n".join(lines)
