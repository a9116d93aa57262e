"""The serving daemon's collector settings (`scheduler.gc_tuning`)."""

from __future__ import annotations

import gc

from pagemind.scheduler.gc_tuning import YOUNG_THRESHOLD, tune_for_serving


def test_serving_freezes_what_exists_and_collects_the_young_less_often():
    threshold = gc.get_threshold()
    made_before = [object() for _ in range(3)] + [[] for _ in range(1000)]
    try:
        tune_for_serving()
        assert gc.get_freeze_count() >= len(made_before)  # out of the collector's sight (lists are tracked)
        tracked = {id(obj) for obj in gc.get_objects()}  # the generations a collection walks, not the frozen
        assert id(made_before) not in tracked and not any(id(obj) in tracked for obj in made_before[3:])
        assert gc.get_threshold() == (YOUNG_THRESHOLD, *threshold[1:])
        cycle: list[object] = []
        cycle.append(cycle)  # made after: still collected
        del cycle
        assert gc.collect() >= 1
    finally:
        gc.unfreeze()
        gc.set_threshold(*threshold)
