"""The recorded traces in tests/traces/ replay identically against today's compiler, loop and tools.

A failure here means behaviour changed: the message shows the first divergence (a unified diff for prompts).
If the change is intended, re-record: `.venv/bin/python tests/traces/record.py` (see its docstring).
"""

from pathlib import Path

import pytest

from pagemind.runtime.trace.format import LINE_ADAPTER
from pagemind.runtime.trace.reader import read_trace
from pagemind.runtime.trace.replay import format_report, replay
from tests.traces.record import SCENARIOS

TRACES = Path(__file__).parents[2] / "traces"
FILES = sorted(TRACES.glob("*.jsonl"))


def test_every_scenario_has_its_recorded_trace():
    assert sorted(p.stem for p in FILES) == sorted(SCENARIOS)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
async def test_recorded_trace_replays_identically(path):
    trace = read_trace(path)
    assert trace.complete, f"{path.name} is truncated"
    report = await replay(trace)
    assert report.status == "identical", (
        f"{format_report(report)}\n\nIf this change of behaviour is intended, re-record the traces: "
        ".venv/bin/python tests/traces/record.py"
    )


@pytest.mark.parametrize("name", sorted(SCENARIOS))
async def test_recording_a_scenario_again_replays_identically(name, tmp_path):
    # The recorder itself is deterministic enough that a fresh recording replays too (guards record.py), and
    # every line it writes (as plain data, for speed) reads back as an event that dumps to the same bytes.
    from tests.traces.record import record_scenario

    path = await record_scenario(name, tmp_path)
    assert (await replay(read_trace(path))).status == "identical"
    for line in path.read_bytes().splitlines():
        assert LINE_ADAPTER.dump_json(LINE_ADAPTER.validate_json(line)) == line
