"""An agent's rows read into a `Bundle`, in one read transaction (`files.export_lines` writes it out).

Every table the format covers (`records.TABLES`) is read by the agent's id, in id order (or time order where rows
have no id of their own), so the file lists messages in the order the window keeps them. Archival rows half
written by a crash (not `live`, or with a write in flight) are left out: the store's own reconcile would finish or
undo them, and an export is what is settled. With encryption at rest on (issue 35), the rows read here are what the
store decrypts: an export holds plain text, and whoever holds the file holds the memory.
"""

from __future__ import annotations

import json
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as package_version
from typing import Any

from sqlalchemy import Table, select
from sqlalchemy.engine import Connection, Engine

from pagemind.runtime.porting.records import AGENT_TABLE, KEEP_ID, PRIVACY_KINDS, TABLES, Bundle, encode
from pagemind.runtime.state.records import aware


class UnknownAgentName(LookupError):
    """No stored agent has the name asked for."""


def read_bundle(engine: Engine, name: str) -> Bundle:
    """The stored agent called `name` with all of its rows; raises UnknownAgentName."""
    with engine.connect() as conn, conn.begin():
        agent = conn.execute(select(AGENT_TABLE).where(AGENT_TABLE.c.name == name)).mappings().first()
        if agent is None:
            raise UnknownAgentName(name)
        bundle = Bundle(agent=agent_record(agent))
        kinds = [k for k in TABLES if k not in PRIVACY_KINDS or k in numbering_kinds(bundle.agent["spec"])]
        for kind in kinds:
            table = TABLES[kind]
            bundle.rows[kind] = [encode(table, row, keep_id=kind in KEEP_ID) for row in _rows(conn, table, agent["id"])]
    return bundle


def numbering_kinds(spec: dict[str, Any]) -> tuple[str, ...]:
    """Which of redaction's numbering records an export of an agent with this spec carries: the HMAC key and the
    numbers only under `privacy.pii: redact` (so `[phone#1]` keeps meaning the same value after a round trip), the
    kept originals only under `keep_originals` too; none otherwise (an agent that stopped redacting keeps its book
    here, it is no part of what it remembers)."""
    privacy = spec.get("privacy") or {}
    if privacy.get("pii") != "redact":
        return ()
    return (
        ("pii_key", "pii_placeholder", "pii_original")
        if privacy.get("keep_originals")
        else ("pii_key", "pii_placeholder")
    )


def agent_record(row: Any) -> dict[str, Any]:
    """The `agent` record: name, spec (as JSON, not text), the window's state, when it was made."""
    return {
        "name": row["name"],
        "spec": json.loads(row["spec_json"]),
        "summary": row["summary"],
        "pressure_warned": bool(row["pressure_warned"]),
        "token_correction": row["token_correction"],
        "created_at": aware(row["created_at"]).isoformat(),
        "updated_at": aware(row["updated_at"]).isoformat(),
    }


def _rows(conn: Connection, table: Table, agent_id: int) -> list[Any]:
    query = select(table).where(table.c.agent_id == agent_id)
    if "state" in table.c:  # archival memories: only settled ones
        query = query.where(table.c.state == "live", table.c.write_token.is_(None))
    order = [table.c[c] for c in ("id", "created_at", "at", "started_at") if c in table.c][:1]
    keys = [c for c in table.primary_key.columns]
    return list(conn.execute(query.order_by(*order, *keys)).mappings())


def pagemind_version() -> str:
    """The installed pagemind's version (the header says which wrote a file)."""
    try:
        return package_version("pagemind")
    except PackageNotFoundError:  # a source tree that was never installed
        return "unknown"
