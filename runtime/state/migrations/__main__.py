"""Write and check schema migrations (a developer's tool; pagemind applies them by itself when a store opens).

    python -m pagemind.runtime.state.migrations revision -m "add steps.cost" --autogenerate
    python -m pagemind.runtime.state.migrations revision -m "backfill costs"      # an empty one to fill in
    python -m pagemind.runtime.state.migrations check                               # state.tables == head?

`revision` numbers the new file after the head (0003, 0004, …) in `migrations/versions/`. With --autogenerate it
compares `state/tables/` with a scratch SQLite database migrated to the head (or `--url` of a scratch Postgres
database, for Postgres-only types) and writes the difference as batch operations, which run on both databases.
Read what it wrote: it cannot see renames (it writes a drop and an add) or data moves, and the raw-DDL recall
index is left out. `check` exits 1 when `state.tables` and the migrations disagree.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from sqlalchemy import create_engine

from pagemind.runtime.state.migrate import alembic_config, head_revision, include_name, migrate
from pagemind.runtime.state.tables.schema import metadata


def _scratch_url(folder: str, url: str | None) -> str:
    return url or f"sqlite:///{Path(folder) / 'scratch.db'}"


def revision(message: str, autogenerate: bool, url: str | None) -> str:
    """Write the next revision file; returns its path."""
    from alembic import command
    from alembic.script import Script

    with tempfile.TemporaryDirectory() as folder:
        engine = create_engine(_scratch_url(folder, url))
        migrate(engine)
        with engine.begin() as conn:
            script = command.revision(
                alembic_config(conn),
                message=message,
                autogenerate=autogenerate,
                rev_id=f"{int(head_revision()) + 1:04d}",
            )
        engine.dispose()
    if not isinstance(script, Script):  # one head, one revision: alembic returns a list only for several heads
        raise RuntimeError(f"alembic wrote no single revision: {script!r}")
    return script.path


def check(url: str | None) -> list[object]:
    """The differences between `state.tables` and a database migrated to the head (empty when they agree)."""
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    with tempfile.TemporaryDirectory() as folder:
        engine = create_engine(_scratch_url(folder, url))
        migrate(engine)
        with engine.connect() as conn:
            context = MigrationContext.configure(conn, opts={"include_name": include_name, "compare_type": True})
            diffs: list[object] = compare_metadata(context, metadata)
        engine.dispose()
    return diffs


def main(argv: list[str] | None = None) -> int:
    """The command line."""
    parser = argparse.ArgumentParser(
        prog="python -m pagemind.runtime.state.migrations", description=__doc__.splitlines()[0]
    )
    commands = parser.add_subparsers(dest="command", required=True)
    new = commands.add_parser("revision", help="write the next migration file")
    new.add_argument("-m", "--message", required=True)
    new.add_argument("--autogenerate", action="store_true", help="fill it from state.tables vs the head")
    new.add_argument("--url", help="a scratch database to compare against (default: a temporary SQLite file)")
    checker = commands.add_parser("check", help="exit 1 if state.tables and the migrations disagree")
    checker.add_argument("--url", help="a scratch database (default: a temporary SQLite file)")
    args = parser.parse_args(argv)
    if args.command == "revision":
        sys.stdout.write(f"wrote {revision(args.message, args.autogenerate, args.url)}\n")
        return 0
    diffs = check(args.url)
    for diff in diffs:
        sys.stdout.write(f"{diff}\n")
    return 1 if diffs else 0


if __name__ == "__main__":
    raise SystemExit(main())
