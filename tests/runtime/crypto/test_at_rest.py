"""Encryption at rest: with a data key, a session's canary words are in no file under PAGEMIND_HOME (the SQLite
database and its WAL, the vector store's shard, the traces) and in no PostgreSQL row, while search still finds the
memory by keyword and by meaning, recall still finds the message, and the CLI shows them; the wrong key, or none,
is a clear error, never ciphertext shown as text."""

from __future__ import annotations

import subprocess
import sys

import pytest

from pagemind.runtime.crypto.cipher import EncryptedDataError, key_cipher
from pagemind.runtime.crypto.keys import new_key_text
from pagemind.runtime.memory.wiring import archival_service
from pagemind.runtime.state.engine import DatabaseOpenError, make_engine
from pagemind.runtime.state.records import utcnow
from pagemind.runtime.state.store import StateStore
from pagemind.runtime.trace.reader import TraceFormatError, read_trace
from tests.runtime.crypto.support import CANARIES, SPEC, files_holding, postgres_rows_text, run_session


def _cli(session, *args: str, key: str | None = "same") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pagemind.runtime.cli.main", *args],
        env=session.env(key),
        capture_output=True,
        text=True,
        timeout=120,
    )


async def test_no_canary_at_rest_and_search_still_works(database_url, tmp_path):
    home = tmp_path / "home"
    session = await run_session(home, database_url)

    for where, canary in CANARIES.items():
        assert files_holding(home, canary) == [], where
    if database_url.startswith("postgresql"):
        rows = postgres_rows_text(database_url).lower()
        assert [where for where, canary in CANARIES.items() if canary in rows] == []
    else:
        assert (home / "pagemind.db-wal").exists() or (home / "pagemind.db").exists()
    assert list((home / "qdrant").rglob("*")) and list((home / "traces").rglob("*.jsonl"))

    store = StateStore.open(session.database_url, session.encryption())
    try:
        record = store.get_agent("vault")
        assert record is not None and CANARIES["summary"] in record.summary  # opened again with the key
        blocks = {b.label: b.value for b in store.load_blocks(record.id, SPEC)}
        assert CANARIES["block edit"] in blocks["human"]
        archival = archival_service(SPEC, store, session.settings(), utcnow, record=record)
        by_keyword = await archival.search(CANARIES["archival memory"], mode="bm25", count_hits=False)
        assert any(CANARIES["archival memory"] in hit.text for hit in by_keyword)
        by_meaning = await archival.search("which medicine does Lin take for her heart", mode="dense")
        assert any(CANARIES["archival memory"] in hit.text for hit in by_meaning)
    finally:
        store.engine.dispose()

    shown = _cli(session, "memory", "search", "vault", CANARIES["user message"], "--in", "recall")
    assert shown.returncode == 0, shown.stderr
    assert CANARIES["user message"] in shown.stdout
    listed = _cli(session, "memory", "archival", "vault")
    assert listed.returncode == 0, listed.stderr
    assert CANARIES["archival memory"] in listed.stdout

    cipher = key_cipher(session.encryption().key)
    [trace] = [
        path
        for path in (home / "traces" / "vault").glob("*.jsonl")
        if CANARIES["user message"] in repr(read_trace(path, cipher).events[0])
    ]
    shown = _cli(session, "trace", "show", str(trace))
    assert shown.returncode == 0, shown.stderr
    assert CANARIES["user message"] in shown.stdout


async def test_the_wrong_key_or_none_is_a_clear_error(database_url, tmp_path):
    home = tmp_path / "home"
    session = await run_session(home, database_url)

    with pytest.raises(DatabaseOpenError, match="wrong encryption key"):
        make_engine(session.database_url, session.encryption(new_key_text()))
    with pytest.raises(DatabaseOpenError, match="is encrypted .* no key was given"):
        make_engine(session.database_url, session.encryption(None))
    unchecked = StateStore(make_engine(session.database_url))  # opened with no key check at all: reads refuse
    try:
        with pytest.raises(EncryptedDataError, match="without its key"):
            unchecked.get_agent("vault")
    finally:
        unchecked.engine.dispose()

    refused = _cli(session, "memory", "archival", "vault", key=new_key_text())
    assert refused.returncode == 2 and "wrong encryption key" in refused.stderr
    assert "Traceback" not in refused.stderr
    refused = _cli(session, "memory", "archival", "vault", key=None)
    assert refused.returncode == 2 and "no key was given" in refused.stderr
    trace = sorted((home / "traces" / "vault").glob("*.jsonl"))[0]
    with pytest.raises(TraceFormatError, match="the trace is encrypted"):
        read_trace(trace)
    with pytest.raises(TraceFormatError, match="not the key given"):
        read_trace(trace, key_cipher(session.encryption(new_key_text()).key))
