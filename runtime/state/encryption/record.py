"""The key-check record: a database opened with the wrong data key, or with none when its text is sealed, fails with a
clear error at open (`make_engine`), never later with garbage.

- No row and no key: encryption off, exactly as before.
- No row and a key: the first open with a key makes the record (a fresh random index key, sealed under the data
  key), but only for a database that holds no text yet: a store written in plaintext stays so (its plaintext rows
  and its plaintext keyword index would otherwise sit beside sealed ones; export it and import it into an
  encrypted one).
- A record: the key given must be its current key (`EncryptionKeyError` otherwise, naming both key ids).

A rotation (`runtime.keyrotation`) adds the key it moves to as the `next` row, and at its end makes it current.
"""

from __future__ import annotations

import base64
import os
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import delete, insert, select, update
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError

from pagemind.runtime.crypto.cipher import EncryptedDataError, TextCipher
from pagemind.runtime.crypto.keys import DataKey, EncryptionKeyError
from pagemind.runtime.state.tables.archival import archival_memories
from pagemind.runtime.state.tables.conversation import MessageRow
from pagemind.runtime.state.tables.schema import table_of
from pagemind.runtime.state.tables.security import data_keys

CHECK_TEXT = "pagemind key check"
CURRENT, NEXT = "current", "next"
_KEY_HELP = "set PAGEMIND_ENCRYPTION_KEY (or PAGEMIND_ENCRYPTION_KEY_FILE) to the key this database was written with"


@dataclass(frozen=True)
class KeyRecord:
    """One row of `data_keys`."""

    role: str
    key_id: str
    check_value: str
    index_key: str


def records(conn: Connection) -> dict[str, KeyRecord]:
    """The database's key records by role (empty: encryption off)."""
    rows = conn.execute(select(data_keys.c.role, data_keys.c.key_id, data_keys.c.check_value, data_keys.c.index_key))
    return {r.role: KeyRecord(r.role, r.key_id, r.check_value, r.index_key) for r in rows}


def _ring(key: DataKey) -> TextCipher:
    return TextCipher(key, b"")  # only to seal or open the record's own fields


def index_key_of(record: KeyRecord, key: DataKey) -> bytes:
    """The record's index key, opened with `key`: raises `EncryptionKeyError` when `key` is not the record's."""
    ring = _ring(key)
    try:
        if ring.open(record.check_value) != CHECK_TEXT:
            raise EncryptedDataError("the key check did not match")
        return base64.b64decode(ring.open(record.index_key))
    except EncryptedDataError:
        raise EncryptionKeyError(
            f"wrong encryption key: this database is encrypted under the data key {record.key_id}, and the key "
            f"given ({key.key_id}) does not open it; {_KEY_HELP}"
        ) from None


def new_record(role: str, key: DataKey, index_key: bytes) -> dict[str, Any]:
    """A `data_keys` row for `key`, holding `index_key`."""
    ring = _ring(key)
    return {
        "role": role,
        "key_id": key.key_id,
        "check_value": ring.seal(CHECK_TEXT),
        "index_key": ring.seal(base64.b64encode(index_key).decode()),
        "created_at": datetime.now(UTC),
    }


def _holds_text(conn: Connection) -> bool:
    return any(
        conn.execute(select(t.c.id).limit(1)).first() is not None for t in (table_of(MessageRow), archival_memories)
    )


def open_cipher(engine: Engine, key: DataKey | None) -> TextCipher | None:
    """The cipher this database's text is sealed with, checked against its key record (made here at the first
    open with a key of a database with no text yet); None: encryption off. Raises `EncryptionKeyError`."""
    with engine.begin() as conn:
        found = records(conn)
        current = found.get(CURRENT)
        if current is None:
            if key is None:
                return None
            if _holds_text(conn):
                raise EncryptionKeyError(
                    "this database already holds unencrypted text: encryption can be turned on only for a new "
                    "database (unset PAGEMIND_ENCRYPTION_KEY to use this one, or export its agents and import them "
                    "into an encrypted one)"
                )
            index_key = os.urandom(32)
            try:
                conn.execute(insert(data_keys), [new_record(CURRENT, key, index_key)])
            except IntegrityError:  # another process made it first: check against its record
                return _checked(engine, key)
            return TextCipher(key, index_key)
    return _checked(engine, key)


def _checked(engine: Engine, key: DataKey | None) -> TextCipher:
    with engine.connect() as conn:
        found = records(conn)
    current, moving_to = found[CURRENT], found.get(NEXT)
    if key is None:
        raise EncryptionKeyError(
            f"this database is encrypted (data key {current.key_id}) and no key was given; {_KEY_HELP}"
        )
    if key.key_id != current.key_id and moving_to is not None and key.key_id == moving_to.key_id:
        raise EncryptionKeyError(
            f"a rotation to the data key {key.key_id} is unfinished: run `pagemind keys rotate-data` again with the "
            f"old key ({current.key_id}) as PAGEMIND_ENCRYPTION_KEY and this one as --new-key-file, to finish it"
        )
    return TextCipher(key, index_key_of(current, key))


def begin_rotation(engine: Engine, cipher: TextCipher, new_key: DataKey, index_key: bytes) -> TextCipher:
    """Record `new_key` as the key a rotation moves to (or find it recorded by a rotation a kill cut short) and
    return the rotation's cipher: sealing under `new_key`, opening under both."""
    with engine.begin() as conn:
        moving_to = records(conn).get(NEXT)
        if moving_to is not None and moving_to.key_id != new_key.key_id:
            raise EncryptionKeyError(
                f"another rotation, to the data key {moving_to.key_id}, is unfinished: finish it first "
                f"(`pagemind keys rotate-data --new-key-file` with that key)"
            )
        if moving_to is None:
            conn.execute(insert(data_keys), [new_record(NEXT, new_key, index_key)])
    return cipher.with_primary(new_key)


def finish_rotation(engine: Engine, new_key: DataKey) -> None:
    """Make the key a rotation moved to the current one (every value is sealed under it by now)."""
    with engine.begin() as conn:
        conn.execute(delete(data_keys).where(data_keys.c.role == CURRENT))
        conn.execute(
            update(data_keys).where(data_keys.c.role == NEXT, data_keys.c.key_id == new_key.key_id).values(role=CURRENT)
        )
