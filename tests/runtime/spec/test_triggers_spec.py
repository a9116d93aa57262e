"""Triggers in the agent YAML (runtime/spec/triggers.py): what loads, and errors that name file, line and field."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from pagemind.runtime.spec.loading import SpecError, load_spec
from pagemind.runtime.spec.triggers import MAINTENANCE_JOBS, IdleTrigger, ScheduleTrigger, parse_duration

HEAD = "name: a\nmodel: {name: m}\nsystem: hi\n"


def write(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "a.yaml"
    path.write_text(HEAD + body)
    return path


def problems(tmp_path: Path, body: str) -> list[str]:
    with pytest.raises(SpecError) as caught:
        load_spec(write(tmp_path, body))
    return caught.value.problems


def test_schedule_and_idle_load(tmp_path):
    spec = load_spec(
        write(
            tmp_path,
            """\
schedule:
  - {cron: "0 9 * * *", timezone: Europe/Berlin, message: Good morning}
  - {every: 30m, run: compact, missed: skip}
idle: {after: 15m, run: compact}
""",
        )
    )
    cron, every = spec.schedule
    assert (cron.kind, cron.content, cron.zone.key, cron.missed) == ("message", "Good morning", "Europe/Berlin", "once")
    assert (every.kind, every.content, every.period, every.missed) == ("job", "compact", timedelta(minutes=30), "skip")
    assert spec.idle is not None and spec.idle.delay == timedelta(minutes=15) and spec.idle.kind == "job"
    assert load_spec(write(tmp_path, "")).schedule == [] and load_spec(write(tmp_path, "")).idle is None


@pytest.mark.parametrize(
    "text, expected",
    [
        ("90s", timedelta(seconds=90)),
        ("15m", timedelta(minutes=15)),
        ("2h", timedelta(hours=2)),
        ("1d", timedelta(days=1)),
        ("1h30m", timedelta(minutes=90)),
        ("1d 2h", timedelta(hours=26)),
    ],
)
def test_durations(text, expected):
    assert parse_duration(text) == expected


@pytest.mark.parametrize("text", ["", "15", "m", "15x", "0m", "-5m", "30m1h", "1.5h"])
def test_bad_durations(text):
    with pytest.raises(ValueError):
        parse_duration(text)


def test_every_error_names_file_line_and_field(tmp_path):
    found = problems(
        tmp_path,
        """\
schedule:
  - cron: "0 9 * *"
    message: hello
  - every: 10s
    message: too often
  - cron: "0 9 * * *"
    timezone: Mars/Olympus
    run: defrag
  - every: 30m
    message: both
    run: compact
  - message: neither
  - {every: 30m, timezone: UTC, message: zoned}
  - {cron: "0 9 * * * 30", message: seconds}
idle:
  after: 15x
  run: compact
""",
    )
    path = tmp_path / "a.yaml"
    assert found[0] == (
        f"{path}:5 schedule[0].cron: not a cron expression: '0 9 * *' (five fields: minute hour "
        "day month weekday, e.g. '0 9 * * *')"
    )
    rest = "\n".join(found[1:])
    assert f"{path}:7 schedule[1].every: '10s' is shorter than one minute" in rest
    assert f"{path}:11 schedule[2].run: unknown job 'defrag' (jobs: compact, reflect)" in rest
    assert f"{path}:10 schedule[2].timezone: unknown time zone 'Mars/Olympus'" in rest
    assert f"{path}:12 schedule[3]: give exactly one of 'message' (a turn) or 'run' (a maintenance job)" in rest
    assert f"{path}:15 schedule[4]: give exactly one of 'cron'" in rest
    assert f"{path}:16 schedule[5].timezone: applies to a cron schedule only" in rest
    assert f"{path}:17 schedule[6].cron: " in rest and "seconds field" in rest
    assert f"{path}:19 idle.after: not a duration: '15x'" in rest
    assert len(found) == 9


def test_the_same_trigger_twice_is_refused(tmp_path):
    found = problems(
        tmp_path,
        """\
schedule:
  - {every: 30m, message: ping}
  - {every: 30m, message: ping, missed: skip}
""",
    )
    assert found == [f"{tmp_path / 'a.yaml'}:6 schedule[1]: the same trigger as schedule[0]"]


def test_keys_are_stable_and_follow_what_and_when_not_the_missed_policy():
    base = ScheduleTrigger(cron="0 9 * * *", message="hi")
    assert base.key == ScheduleTrigger(cron="0  9 * * *", message="hi", missed="skip").key
    assert base.key == ScheduleTrigger(cron="0 9 * * *", timezone="UTC", message="hi").key
    assert base.key.startswith("cron-") and len(base.key) == len("cron-") + 16
    others = {
        ScheduleTrigger(cron="0 10 * * *", message="hi").key,
        ScheduleTrigger(cron="0 9 * * *", message="hello").key,
        ScheduleTrigger(cron="0 9 * * *", timezone="Europe/Berlin", message="hi").key,
        ScheduleTrigger(cron="0 9 * * *", run="compact").key,
    }
    assert base.key not in others and len(others) == 4
    assert ScheduleTrigger(every="60m", message="x").key == ScheduleTrigger(every="1h", message="x").key
    assert IdleTrigger(after="15m", run="compact").key.startswith("idle-")
    # the key is a pure function of the definition: the same in every process, run after run
    assert (
        ScheduleTrigger(every="30m", message="x").key
        == "every-"
        + __import__("hashlib").sha256(b'{"content": "x", "every": 1800.0, "kind": "message"}').hexdigest()[:16]
    )


def test_the_runtime_knows_the_jobs_the_scheduler_registers():
    from pagemind.scheduler.jobs import JOBS

    assert set(MAINTENANCE_JOBS) == set(JOBS)  # a job registered there is usable in YAML only once listed here


def test_adding_the_trigger_fields_changed_no_existing_fingerprint():
    from pagemind.runtime.testing.specs import build_spec

    plain = build_spec()
    assert plain.spec_hash() == "3efac6040d76d9d2"  # what main computed for this spec before triggers existed
    with_idle = build_spec(idle={"after": "15m", "run": "compact"})
    assert with_idle.spec_hash() != plain.spec_hash()
    assert build_spec(schedule=[{"every": "1h", "message": "x"}]).spec_hash() != plain.spec_hash()
