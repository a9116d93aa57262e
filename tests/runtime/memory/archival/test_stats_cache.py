"""Archival statistics in a turn (`ArchivalService.turn_stats`): the agent's revision is read once per turn, the
turn's own writes still show at once, and another instance's writes show from the next turn (at once outside)."""

from __future__ import annotations

from sqlalchemy import event

from tests.runtime.memory.archival.test_archival import backend, run  # noqa: F401 (the backend fixture)
from tests.runtime.memory.archival.test_archival_counts import pair  # noqa: F401 (two services of one agent over one database)


def revision_reads(service) -> list[str]:
    """A list that fills with every read of the agent's revision the service's engine runs from now on."""
    seen: list[str] = []
    event.listen(
        service.engine,
        "before_cursor_execute",
        lambda conn, cursor, statement, *rest: (
            seen.append(statement)
            if "archival_revisions.revision" in statement and statement.lstrip().startswith("SELECT")
            else None
        ),
    )
    return seen


def test_a_turn_reads_the_revision_once(pair):
    writer, reader, _ = pair
    run(writer.insert("Lin plays the cello", tags=["music"]))
    reads = revision_reads(reader)
    with reader.turn_stats():
        assert [reader.stats() for _ in range(3)] == [(1, ("music",))] * 3
        assert [h.text for h in run(reader.search("cello"))] == ["Lin plays the cello"]
    assert len(reads) == 1  # the first stats() read it (and the rows); the rest reused it
    reader.stats()
    assert len(reads) == 2  # outside a turn every call checks


def test_the_turns_own_write_shows_at_once(pair):
    agent, _, _ = pair
    with agent.turn_stats():
        assert agent.stats() == (0, ())
        run(agent.insert("Lin plays the cello", tags=["music"]))
        assert agent.stats() == (1, ("music",))


def test_another_instances_write_shows_from_the_next_turn(pair):
    writer, reader, _ = pair
    with reader.turn_stats():
        assert reader.stats() == (0, ())
        run(writer.insert("Lin plays the cello", tags=["music"]))
        assert reader.stats() == (0, ())  # as of the turn's start
    with reader.turn_stats():
        assert reader.stats() == (1, ("music",))
        assert [h.text for h in run(reader.search("cello"))] == ["Lin plays the cello"]


def test_a_positive_count_skips_the_emptiness_read_and_a_stale_one_finds_nothing(pair):
    writer, reader, _ = pair
    memory = run(writer.insert("Lin plays the cello"))
    assert reader.stats()[0] == 1
    reads = revision_reads(reader)
    assert run(writer.forget(memory.id))
    assert run(reader.search("cello")) == []  # the cached 1 let the search run; it found nothing live
    assert reads == [] and reader.stats() == (0, ())


def test_the_revision_read_at_the_turns_start_stands_for_the_first_read(pair):
    writer, reader, _ = pair
    run(writer.insert("Lin plays the cello", tags=["music"]))
    assert reader.stats() == (1, ("music",))
    reads = revision_reads(reader)
    with reader.turn_stats(revision=reader.ledger.revision()):  # as `Agent.refresh` reads it, with the freshness
        reads.clear()
        assert reader.stats() == (1, ("music",)) and reader.stats() == (1, ("music",))
        assert reads == []
        run(reader.insert("Lin plays the viola", tags=["music", "viola"]))  # the turn's own write shows at once
        assert reader.stats()[1] == ("music", "viola")  # (it replaced the cello: the same vector)


def test_a_stale_revision_from_the_turns_start_reads_the_rows_again(pair):
    writer, reader, _ = pair
    assert reader.stats() == (0, ())
    run(writer.insert("Lin plays the cello", tags=["music"]))
    with reader.turn_stats(revision=writer.ledger.revision()):
        assert reader.stats() == (1, ("music",))


async def test_an_agent_sees_another_instances_memory_from_its_next_turn(tmp_path, clock):
    """Two loaded instances of one agent (as two processes have): the turn-start check carries the archival
    revision, so a memory one stored between turns is in the other's next prompt."""
    from pagemind.runtime.agent import Agent
    from pagemind.runtime.process.settings import Settings
    from pagemind.runtime.testing.models import FunctionModel
    from pagemind.runtime.testing.responses import tool_call_body
    from pagemind.runtime.testing.specs import build_spec

    spec = build_spec(tools=["send_message", "archival_memory_insert", "archival_search"])
    settings = Settings(home=tmp_path, database_url=f"sqlite:///{tmp_path / 'p.db'}")
    model = FunctionModel(lambda request: tool_call_body("send_message", {"message": "ok"}))
    first = await Agent.load(spec, model=model, settings=settings, clock=clock)
    second = await Agent.load(spec, model=model, settings=settings, clock=clock)
    await second.send("hello")
    assert "Archival memory: 0 memories" in model.requests[-1].messages[-1]["content"]
    await first.archival.insert("Lin is severely allergic to peanuts.", kind="constraint", tags=["health"])
    await second.send("hello again")
    assert "Archival memory: 1 memories (tags: health)" in model.requests[-1].messages[-1]["content"]


def test_a_block_inside_a_turns_block_changes_nothing(pair):
    writer, reader, _ = pair
    run(writer.insert("Lin plays the cello", tags=["music"]))
    assert reader.stats() == (1, ("music",))
    reads = revision_reads(reader)
    with reader.turn_stats(revision=reader.ledger.revision()):
        reads.clear()
        with reader.turn_stats():  # as `loop.run_turn` opens one inside `Agent.run_turn`'s
            assert reader.stats() == (1, ("music",))
        assert reader.stats() == (1, ("music",))
        assert reads == []  # the outer block's revision stood for both


async def test_a_turn_run_by_the_loop_alone_reads_the_revision_once(tmp_path, clock, monkeypatch):
    """The daemon runs a message item with `loop.run_turn`, not `Agent.run_turn`: one read for the whole turn (the
    prefetch's emptiness check, then the compile), not one per read; with the shortcut off, one per read."""
    from pagemind.runtime.agent import Agent
    from pagemind.runtime.loop import run_turn
    from pagemind.runtime.process.settings import Settings
    from pagemind.runtime.testing.models import FunctionModel
    from pagemind.runtime.testing.responses import tool_call_body
    from pagemind.runtime.testing.specs import build_spec

    spec = build_spec(tools=["send_message", "archival_memory_insert"])
    settings = Settings(home=tmp_path, database_url=f"sqlite:///{tmp_path / 'p.db'}")
    model = FunctionModel(lambda request: tool_call_body("send_message", {"message": "ok"}))
    agent = await Agent.load(spec, model=model, settings=settings, clock=clock)
    reads = revision_reads(agent.archival)
    asked = "Do you remember what I told you about my sister Mei and her cello teacher last week?"  # a lookup
    await run_turn(agent, asked)
    assert len(reads) == 1  # the prefetch's check read it (no memory yet); the compile reused it
    assert "Archival memory: 0 " in model.requests[-1].messages[-1]["content"]
    reads.clear()
    monkeypatch.setenv("PAGEMIND_TURN_SHORTCUTS", "off")  # read at each turn, not at import
    await run_turn(agent, asked)
    assert len(reads) == 2  # without the turn's block: the prefetch's check, then the compile's
