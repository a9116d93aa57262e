from datetime import UTC, datetime

import pytest

from pagemind.blocks import Block, BlockEditError, CoreMemory

T = datetime(2026, 1, 1, tzinfo=UTC)


def memory() -> CoreMemory:
    return CoreMemory([Block("human", "Name: Lin\nLikes tea\nLikes tea", 40), Block("rules", "x", 10, read_only=True)])


def test_append_over_limit_is_refused_with_sizes():
    mem = memory()
    with pytest.raises(BlockEditError) as err:
        mem.append("human", "Allergic to peanuts", T)
    text = str(err.value)
    assert "hold 49 characters" in text and "limit is 40" in text and "holds 29 now" in text
    assert mem.pending == [] and mem.get("human").value.endswith("Likes tea")


def test_replace_requires_exactly_one_occurrence():
    mem = memory()
    with pytest.raises(BlockEditError, match=r"occurs 2 times .*lines 2, 3"):
        mem.replace("human", "Likes tea", "Likes coffee", T)
    with pytest.raises(BlockEditError, match="not found"):
        mem.replace("human", "Likes juice", "x", T)
    mem.replace("human", "Name: Lin", "Name: Lin Wei", T)
    assert mem.get("human").value.startswith("Name: Lin Wei\n")
    edit = mem.pending[-1]
    assert (edit.operation, edit.old_value, edit.new_value.splitlines()[0]) == (
        "replace",
        "Name: Lin\nLikes tea\nLikes tea",
        "Name: Lin Wei",
    )


def test_read_only_and_unknown_blocks_refuse_edits():
    mem = memory()
    with pytest.raises(BlockEditError, match="read-only"):
        mem.rethink("rules", "y", T)
    with pytest.raises(BlockEditError, match="No block labelled 'plan'.*human, rules"):
        mem.append("plan", "x", T)


def test_rethink_replaces_whole_value_and_copy_is_independent():
    mem = memory()
    working = mem.copy()
    working.rethink("human", "Name: Lin", T)
    assert working.get("human").value == "Name: Lin"
    assert mem.get("human").value.startswith("Name: Lin\nLikes tea")
    assert [e.operation for e in working.clear_pending()] == ["rethink"] and working.pending == []
