"""A rotation from start to end: record the new key, re-seal the SQL columns, the vector stores' texts and the
traces, then make the new key current. Run again after a kill, with the same two keys, it goes on where it stopped
(`rows`, `stores`). The daemon must not run meanwhile: a process holding the old key alone cannot open what is
already under the new one (it fails with a clear error, nothing is lost)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from sqlalchemy import select
from sqlalchemy.engine import Engine

from pagemind.runtime.crypto.columns import cipher_of
from pagemind.runtime.crypto.keys import DataKey, EncryptionKeyError
from pagemind.runtime.keyrotation.rows import BATCH, reseal_column, sealed_columns
from pagemind.runtime.keyrotation.stores import reseal_points, reseal_trace, trace_files
from pagemind.runtime.process.settings import Settings
from pagemind.runtime.state.encryption.record import begin_rotation, finish_rotation
from pagemind.runtime.state.tables.agents import AgentRow
from pagemind.runtime.state.tables.schema import table_of


@dataclass
class Rotated:
    """What a rotation re-sealed."""

    key_id: str
    rows: dict[str, int] = field(default_factory=dict)  # per `table.column`
    points: int = 0
    traces: int = 0


def rotate_data(
    engine: Engine,
    settings: Settings,
    new_key: DataKey,
    *,
    batch: int = BATCH,
    progress: Callable[[str], None] = lambda _line: None,
) -> Rotated:
    """Re-seal everything under `new_key` (`engine`: the database opened with its current key) and make it the
    current key. Raises `EncryptionKeyError` for a database without encryption or another rotation unfinished."""
    cipher = cipher_of(engine)
    if cipher is None:
        raise EncryptionKeyError(
            "this database is not encrypted (or was opened without its key): a rotation needs its current key in "
            "PAGEMIND_ENCRYPTION_KEY or PAGEMIND_ENCRYPTION_KEY_FILE"
        )
    if new_key.key_id == cipher.key_id:
        raise EncryptionKeyError(f"the new key is the current one ({new_key.key_id}): nothing to rotate")
    ring = begin_rotation(engine, cipher, new_key, cipher.index_key)
    done = Rotated(new_key.key_id)
    for column in sealed_columns():
        done.rows[column.name] = sum(reseal_column(engine, column, ring, batch))
        if done.rows[column.name]:
            progress(f"{column.name}: {done.rows[column.name]} re-sealed")
    with engine.connect() as conn:
        agent_ids = list(conn.execute(select(table_of(AgentRow).c.id)).scalars())
    done.points = reseal_points(settings, agent_ids, ring)
    done.traces = sum(reseal_trace(path, ring) for path in trace_files(settings.home))
    finish_rotation(engine, new_key)
    return done
