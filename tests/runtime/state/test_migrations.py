"""Schema migrations: fresh databases, many processes starting at once, and databases made by pagemind 0.1.0.

The 0.1.0 fixtures in tests/fixtures/v1/ were made by that release's own code (tests/fixtures/make_v1_fixture.py,
run from a checkout of commit 1d24805): a SQLite file, a pg_dump of a Postgres schema, and the embedded Qdrant
store they share (memory ids are content-derived, so both runs wrote the same points).
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import shutil
import subprocess
import sys
import tarfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy

from pagemind.runtime.state.engine import make_engine
from pagemind.runtime.state.migrate import MIGRATIONS, alembic_config, current_revision, head_revision, include_name
from pagemind.runtime.state.tables.schema import metadata

V1_START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)  # tests/fixtures/make_v1_fixture.py's clock

ROOT = Path(__file__).parents[3]
V1 = Path(__file__).parents[2] / "fixtures" / "v1"
PROCESSES = 8


def schema_differences(engine: sqlalchemy.Engine) -> list[object]:
    """What autogenerate would still write: `state.tables` against the migrated database."""
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    with engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"include_name": include_name, "compare_type": True})
        return compare_metadata(context, metadata)


def revision_of(engine: sqlalchemy.Engine) -> str | None:
    with engine.connect() as conn:
        return current_revision(conn)


def test_revisions_are_one_numbered_line_and_the_head_is_known_without_alembic():
    from alembic.script import ScriptDirectory

    script = ScriptDirectory.from_config(alembic_config())
    revisions = list(reversed(list(script.walk_revisions())))
    assert [r.revision for r in revisions] == [f"{n:04d}" for n in range(1, len(revisions) + 1)]
    assert [r.down_revision for r in revisions] == [None, *(r.revision for r in revisions[:-1])]
    assert script.get_heads() == [head_revision()]
    assert sorted(p.name[:4] for p in (MIGRATIONS / "versions").glob("*.py") if p.name[0].isdigit()) == [
        r.revision for r in revisions
    ]


def test_a_fresh_database_is_migrated_to_exactly_the_declared_schema(database_url):
    engine = make_engine(database_url)
    assert revision_of(engine) == head_revision()
    assert schema_differences(engine) == []
    make_engine(database_url).dispose()  # opening again at head is a no-op
    engine.dispose()


def test_a_database_from_a_newer_pagemind_is_refused_with_a_clear_error(tmp_path):
    from pagemind.runtime.state.migrate import SchemaTooNew

    url = f"sqlite:///{tmp_path / 'new.db'}"
    make_engine(url).dispose()
    engine = sqlalchemy.create_engine(url)
    with engine.begin() as conn:
        conn.execute(sqlalchemy.text("UPDATE alembic_version SET version_num = '9999'"))
    engine.dispose()
    with pytest.raises(SchemaTooNew, match="upgrade pagemind"):
        make_engine(url)


# -- many processes starting at once ------------------------------------------------------------------------------


def _first_start(url: str, barrier: object, results: object) -> None:
    from pagemind.runtime.state.store import StateStore  # import before the barrier: only the opening races

    barrier.wait()
    try:
        store = StateStore.open(url)
        results.put(("ok", revision_of(store.engine)))
        store.engine.dispose()
    except Exception as exc:  # reported to the test, which names the failure
        results.put(("error", f"{type(exc).__name__}: {exc}"))


def test_many_processes_opening_a_fresh_database_at_once_all_succeed(database_url):
    context = multiprocessing.get_context("spawn")
    barrier, results = context.Barrier(PROCESSES), context.Queue()
    workers = [context.Process(target=_first_start, args=(database_url, barrier, results)) for _ in range(PROCESSES)]
    for worker in workers:
        worker.start()
    outcomes = [results.get(timeout=300) for _ in workers]
    for worker in workers:
        worker.join(timeout=60)
    assert outcomes == [("ok", head_revision())] * PROCESSES
    assert [w.exitcode for w in workers] == [0] * PROCESSES
    engine = make_engine(database_url)
    assert schema_differences(engine) == []
    engine.dispose()


# -- databases made by pagemind 0.1.0 -----------------------------------------------------------------------------


def load_v1(database_url: str, home: Path) -> None:
    """Put the 0.1.0 fixture at `database_url` (SQLite: the file; Postgres: the dump, into its fresh schema) and
    its Qdrant store under `home`."""
    if database_url.startswith("sqlite:///"):
        shutil.copyfile(V1 / "pagemind.db", database_url.removeprefix("sqlite:///"))
    else:
        schema = database_url.rsplit("%3D", 1)[1].split("&", 1)[0]  # the search_path option, not what follows
        dump = (V1 / "postgres.sql").read_text().replace("CREATE SCHEMA __SCHEMA__;", "")
        engine = sqlalchemy.create_engine(database_url)
        raw = engine.raw_connection()
        try:
            raw.cursor().execute(dump.replace("__SCHEMA__", schema))  # plain SQL, no parameters: one round trip
            raw.commit()
        finally:
            raw.close()
            engine.dispose()
    with tarfile.open(V1 / "qdrant.tar.xz") as archive:
        archive.extractall(home)


def test_a_database_made_by_0_1_0_upgrades_in_place_with_its_data(database_url, isolated_home, monkeypatch):
    from pagemind.runtime.agent import Agent
    from pagemind.runtime.memory.vectors.stores import close_all
    from pagemind.runtime.spec.agent import AgentSpec
    from pagemind.runtime.state.store import StateStore

    load_v1(database_url, isolated_home)
    monkeypatch.setenv("DATABASE_URL", database_url)
    store = StateStore.open(database_url)
    assert revision_of(store.engine) == head_revision() and schema_differences(store.engine) == []
    companion = store.get_agent("companion")
    assert [a.name for a in store.list_agents()] == ["assistant", "companion"]
    spec = AgentSpec.model_validate_json(store.stored_spec_json("companion"))
    assert {b.label: b.value for b in store.load_blocks(companion.id, spec)} == {
        "persona": "I am a warm companion.",
        "human": "Name: Lin.",
    }
    assert [v.operation for v in store.block_history(companion.id)] == ["append"]
    messages = store.all_messages(companion.id)
    assert len(messages) == store.message_count(companion.id) == 16
    assert messages[0].content == "My sister Mei lives in Lyon. She loves hiking. I'm Lin."

    async def use() -> tuple[list, list, list, list]:
        # Read soon after the data was written (a later date would do as well: disuse counts the agent's active
        # days, `memory.activity`, and none followed).
        soon = lambda: V1_START + timedelta(days=10)  # noqa: E731
        agent = await Agent.load(spec, store=store, clock=soon)
        other = await Agent.load(
            AgentSpec.model_validate_json(store.stored_spec_json("assistant")), store=store, clock=soon
        )
        recalled = await agent.recall.search("Lyon")
        found = await agent.archival.search("Where does Mei live?", count_hits=False)
        theirs = await other.archival.search("Where does Mei live?", count_hits=False)
        return recalled, found, theirs, agent.archival.store.all()

    recalled, found, theirs, points = asyncio.run(use())
    assert any("Mei lives in Lyon" in hit.text for hit in recalled)
    assert found[0].text == "Lin's sister Mei lives in Lyon and loves hiking."
    assert all("Mei" not in hit.text for hit in theirs)  # re-keyed points stay with their own agent
    assert sorted(p.text for p in points) == [
        "Lin takes oat milk in coffee.",
        "Lin's sister Mei lives in Lyon and loves hiking.",
    ]
    assert {p.agent_id for p in points} == {companion.id}
    close_all()
    store.engine.dispose()

    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "QDRANT_"))}
    listing = subprocess.run(
        [sys.executable, "-m", "pagemind.runtime.cli.main", "memory", "archival", "companion", "--all"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert listing.returncode == 0, listing.stderr
    assert listing.stdout.startswith("2 live archival memories; tags: family, food, preference")
    assert "Lin's sister Mei lives in Lyon and loves hiking." in listing.stdout
