"""The SQL half of a rotation: every value of every encrypted column (`runtime.crypto.columns`: found by type, so a
table that opts in is rotated with no change here) re-sealed under the new key, a batch per transaction.

A batch is the rows whose stored value is not yet under the new key (`NOT LIKE 'pmenc1:<new id>:%'`): each is
opened (under the old key, or plaintext) and sealed once under the new key, by its primary key, and the batch
commits. A kill between batches loses nothing (a committed batch is done, the next one is still under the old
key, which the rotation's cipher still opens) and doubles nothing (a value under the new key is never selected
again, and a value is always opened before it is sealed).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from sqlalchemy import JSON, Column, Table, Text, and_, cast, select, type_coerce, update
from sqlalchemy.engine import Engine
from sqlalchemy.sql.elements import ColumnElement

from pagemind.runtime.crypto.cipher import PREFIX, TextCipher, is_sealed
from pagemind.runtime.crypto.columns import EncryptedJSON, EncryptedText
from pagemind.runtime.process.crashpoints import crash_point
from pagemind.runtime.state.tables.schema import metadata

BATCH = 500  # rows a transaction re-seals


@dataclass(frozen=True)
class SealedColumn:
    """An encrypted column of a table, and whether it holds JSON."""

    table: Table
    column: Column[Any]
    is_json: bool

    @property
    def name(self) -> str:
        """`table.column`, for reports."""
        return f"{self.table.name}.{self.column.name}"


def sealed_columns() -> list[SealedColumn]:
    """Every encrypted column of the schema (`state.tables`), in table order."""
    return [
        SealedColumn(table, column, isinstance(column.type, EncryptedJSON))
        for table in metadata.sorted_tables
        for column in table.columns
        if isinstance(column.type, EncryptedText | EncryptedJSON)
    ]


def _pending(sealed: SealedColumn, key_id: str, batch: int) -> Any:
    """The next batch of rows of the column not yet under the key `key_id`: primary key, then the stored value."""
    column, quote = sealed.column, '"' if sealed.is_json else ""
    stored = cast(column, Text)
    where: list[ColumnElement[bool]] = [column.is_not(None), stored.not_like(f"{quote}{PREFIX}{key_id}:%")]
    if sealed.is_json:
        where.append(stored != "null")  # JSON null: nothing to seal
    raw = type_coerce(column, JSON if sealed.is_json else Text)
    return select(*sealed.table.primary_key.columns, raw.label("pm_value")).where(and_(*where)).limit(batch)


def _resealed(value: Any, is_json: bool, cipher: TextCipher) -> Any:
    if not is_json:
        return cipher.seal(cipher.open(value))
    plain = json.loads(cipher.open(value)) if isinstance(value, str) and is_sealed(value) else value
    return cipher.seal(json.dumps(plain))


def reseal_column(engine: Engine, sealed: SealedColumn, cipher: TextCipher, batch: int = BATCH) -> Iterator[int]:
    """Re-seal the column's values under `cipher`'s primary key, a batch per transaction; yields each batch's size
    once it is committed."""
    keys = list(sealed.table.primary_key.columns)
    query = _pending(sealed, cipher.key_id, batch)
    value_type = JSON if sealed.is_json else Text
    while True:
        with engine.begin() as conn:
            rows = conn.execute(query).all()
            for row in rows:
                *ids, value = row
                conn.execute(
                    update(sealed.table)
                    .where(*(key == id_ for key, id_ in zip(keys, ids, strict=True)))
                    .values({sealed.column.name: type_coerce(_resealed(value, sealed.is_json, cipher), value_type)})
                )
        if not rows:
            return
        crash_point("rotate.batch")  # committed: a kill here loses nothing and leaves the rest for a rerun
        yield len(rows)
