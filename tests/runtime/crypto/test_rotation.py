"""`pagemind keys rotate-data`: every sealed value moves to the new key, and a rotation killed midway (SIGKILL at a
chosen batch) finishes when run again: no row lost, none sealed twice, search and traces work under the new key,
and the old key no longer opens the database."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
from sqlalchemy import Text, select, type_coerce

from pagemind.runtime.crypto.cipher import key_cipher, key_id_of
from pagemind.runtime.crypto.keys import new_key_text, parse_key
from pagemind.runtime.keyrotation.rows import sealed_columns
from pagemind.runtime.memory.vectors.stores import close_all
from pagemind.runtime.memory.wiring import archival_service
from pagemind.runtime.state.engine import DatabaseOpenError, make_engine
from pagemind.runtime.state.records import utcnow
from pagemind.runtime.state.store import StateStore
from pagemind.runtime.trace.reader import read_trace
from tests.runtime.crypto.support import CANARIES, SPEC, Session, files_holding, run_session


def _opened(engine: Any) -> dict[tuple[str, tuple[Any, ...]], Any]:
    """Every encrypted column's value, opened, by (column, primary key)."""
    found = {}
    with engine.connect() as conn:
        for sealed in sealed_columns():
            keys = list(sealed.table.primary_key.columns)
            for *ids, value in conn.execute(select(*keys, sealed.column)):
                found[(sealed.name, tuple(ids))] = value
    return found


def _key_ids(engine: Any) -> set[str | None]:
    """The key ids of every stored text value (None: plaintext)."""
    ids: set[str | None] = set()
    with engine.connect() as conn:
        for sealed in sealed_columns():
            if not sealed.is_json:
                raw = conn.execute(select(type_coerce(sealed.column, Text)).where(sealed.column.is_not(None)))
                ids |= {key_id_of(value) for value in raw.scalars()}
    return ids


def _rotate(session: Session, key_file: str, kill_at: str | None = None) -> subprocess.CompletedProcess[str]:
    env = session.env()
    if kill_at:
        env["PAGEMIND_KILL_AT"] = kill_at
    return subprocess.run(
        [sys.executable, "-m", "pagemind.runtime.cli.main", "keys", "rotate-data", "--new-key-file", key_file]
        + ["--batch", "1"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


async def test_a_rotation_killed_midway_finishes_when_run_again(database_url, tmp_path):
    home = tmp_path / "home"
    session = await run_session(home, database_url)
    old, new = session.encryption().key, parse_key(new_text := new_key_text(), "test")
    assert old is not None
    before = StateStore.open(session.database_url, session.encryption())
    values = _opened(before.engine)
    before.engine.dispose()
    assert len(values) > 20 and any(CANARIES["block edit"] in str(v) for v in values.values())
    key_file = tmp_path / "new.key"
    key_file.write_text(new_text + "\n")

    killed = _rotate(session, str(key_file), kill_at="rotate.batch@12")
    assert killed.returncode == -9, killed.stderr  # SIGKILL at the 12th committed batch
    raw = make_engine(session.database_url)
    try:
        assert _key_ids(raw) == {old.key_id, new.key_id}  # half way: some rows moved, the rest not yet
    finally:
        raw.dispose()
    with pytest.raises(DatabaseOpenError, match="rotation to the data key .* is unfinished"):
        make_engine(session.database_url, session.encryption(new_text))

    done = _rotate(session, str(key_file))
    assert done.returncode == 0, done.stderr
    assert f"rotated to the data key {new.key_id}" in done.stdout

    with pytest.raises(DatabaseOpenError, match="wrong encryption key"):
        make_engine(session.database_url, session.encryption())  # the old key no longer opens it
    after = StateStore.open(session.database_url, session.encryption(new_text))
    try:
        assert _opened(after.engine) == values  # no row lost, none sealed twice
        assert _key_ids(after.engine) == {new.key_id}
        record = after.get_agent("vault")
        assert record is not None
        archival = archival_service(SPEC, after, session.settings(new_text), utcnow, record=record)
        hits = await archival.search(CANARIES["archival memory"], mode="bm25", count_hits=False)
        assert any(CANARIES["archival memory"] in hit.text for hit in hits)  # the blind index still matches
        dense = await archival.search("which medicine does Lin take for her heart", mode="dense", count_hits=False)
        assert any(CANARIES["archival memory"] in hit.text for hit in dense)  # the payload opens under the new key
    finally:
        after.engine.dispose()
        close_all()
    for trace in sorted((home / "traces").rglob("*.jsonl")):
        assert read_trace(trace, key_cipher(new)).events
    for canary in CANARIES.values():
        assert files_holding(home, canary) == []
