"""PostgreSQL: what it does where SQLite differs (`runtime.state.dialects`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import Table, func, text
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import URL, Connection
from sqlalchemy.sql import Select


class Postgres:
    """The PostgreSQL backend."""

    name = "postgresql"
    awaits_statements = True  # a synchronous statement held the daemon's whole event loop for its round trip
    runs_inline = False
    held_reads = True  # a pooled checkout costs a ping and a reset around one statement
    write_begin: str | None = None
    autocommit_statements = True  # no BEGIN and COMMIT round trips around a statement that is its own transaction
    notices = True
    session_locks = True
    savepoint_per_statement = True  # a failed statement aborts the whole transaction: a savepoint keeps the rest
    ids_as_json = False
    damaged_hint = "check DATABASE_URL, that the server is running and that the database exists"
    fulltext_insert = (
        "INSERT INTO recall_fts (message_id, agent_id, tsv) VALUES (:id, :a, "
        "setweight(to_tsvector('simple', :own), 'A') || setweight(to_tsvector('simple', :ctx), 'B')) "
        "ON CONFLICT (message_id) DO NOTHING"
    )
    fulltext_erase: tuple[str, ...] = ("DELETE FROM recall_fts WHERE agent_id = :a",)  # an agent's recall index rows
    keeps_deleted_pages = False  # dead rows until VACUUM: the server's, not a purge's (docs, operations page)
    watermark_upsert = (
        "INSERT INTO recall_watermarks (agent_id, message_id) VALUES (:a, :m) ON CONFLICT "
        "(agent_id) DO UPDATE SET message_id = GREATEST(recall_watermarks.message_id, :m)"
    )

    def insert(self, table: Table) -> Any:
        """`INSERT … ON CONFLICT` for `table`."""
        return postgresql.insert(table)

    def database_file(self, url: URL) -> Path | None:
        """None: a server."""
        return None

    def engine_file(self, database_url: str) -> Path | None:
        """None: a server."""
        return None

    def notifying(self, channel: str, payload: Any) -> list[Any]:
        """A `pg_notify` column: the notice goes out when the statement commits."""
        return [func.pg_notify(channel, payload).label("notified")]

    def notify(self, conn: Connection, channel: str, payload: str) -> None:
        """`pg_notify` in the transaction: delivered at its commit."""
        conn.execute(text("SELECT pg_notify(:channel, :payload)"), {"channel": channel, "payload": payload})

    def relax_commit(self, conn: Connection) -> None:
        """`synchronous_commit` off for this transaction: its commit does not wait for the WAL's flush."""
        conn.exec_driver_sql("SET LOCAL synchronous_commit TO OFF")

    def lock_migrations(self, conn: Connection, key: int) -> None:
        """A transaction-level advisory lock: other processes' migrations wait for this one's commit."""
        conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": key})

    def skip_locked(self, query: Select[Any], of: Table) -> Select[Any]:
        """`FOR UPDATE OF … SKIP LOCKED`: two daemons looking at once take different rows."""
        return query.with_for_update(of=of, skip_locked=True)

    def fulltext_row(self, message_id: int, agent_id: int, own: str, context: str) -> dict[str, object]:
        """Own terms weighted A, context B, in one `tsvector`."""
        return {"id": message_id, "a": agent_id, "own": own, "ctx": context}

    def fulltext_search(
        self, conn: Connection, agent_id: int, terms: list[str], own_weight: float
    ) -> list[tuple[int, float]]:
        """`ts_rank` over the agent's `tsvector`s (weights {D, C, B=context, A=own})."""
        query = " | ".join(f"'{t}'" for t in terms)
        rows = conn.execute(
            text(
                "SELECT message_id, ts_rank(CAST(:w AS float4[]), tsv, to_tsquery('simple', :q)) "
                "FROM recall_fts "
                "WHERE agent_id = :a AND tsv @@ to_tsquery('simple', :q)"
            ),
            {"q": query, "a": agent_id, "w": [0.05, 0.1, 1 / (1 + own_weight), 1.0]},
        )
        return [(int(i), float(s)) for i, s in rows]


POSTGRES = Postgres()
