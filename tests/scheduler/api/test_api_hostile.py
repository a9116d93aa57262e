"""Posted input that could stall or steer the daemon (issue 34, item 9): an inline schema's catastrophic pattern is
answered at once while /health answers beside it, and an agent posted as YAML may not wake itself more often than
`min_api_trigger_s` (15 minutes by default), counting all its schedule triggers together."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from pagemind.runtime.spec.loading import parse_spec
from pagemind.scheduler.api.trigger_limit import shortest_gap, too_frequent
from tests.scheduler.api.test_api import served  # noqa: F401 (a fixture)

YAML = "application/yaml"
PATTERNED = """
name: patterned
model: {name: gpt-4o-mini}
system: Posted through the API.
blocks:
  - label: code
    limit: 2000
    value: {code: aaa}
    schema: {type: object, properties: {code: {type: string, pattern: "^(a+)+$"}}}
"""


async def test_a_catastrophic_pattern_answers_a_clear_422_and_health_answers_beside_it(served):  # noqa: F811
    client, _, _ = served
    made = await client.post("/v1/agents", content=PATTERNED, headers={"content-type": YAML})
    assert made.status_code == 201, made.text
    hostile = '{"code": "' + "a" * 60 + '!"}'  # 2**60 steps for a backtracking engine
    patched, health = await asyncio.gather(
        client.patch("/v1/agents/patterned/memory/blocks/code", json={"value": hostile}),
        client.get("/v1/health"),
    )
    assert health.status_code == 200
    assert patched.status_code == 422 and patched.json()["error"]["code"] == "schema"
    assert "does not match '^(a+)+$'" in patched.json()["error"]["message"]
    lookaround = PATTERNED.replace("^(a+)+$", "^(?=a)a+$").replace("patterned", "lookaround")
    refused = await client.post("/v1/agents", content=lookaround, headers={"content-type": YAML})
    assert refused.status_code == 422 and "matched in linear time by RE2" in refused.json()["error"]["message"]


def scheduled(*triggers: str) -> str:
    lines = "\n".join(f"  - {t}" for t in triggers)
    return (
        "name: busy\nmodel: {name: gpt-4o-mini}\nsystem: Posted.\nblocks: [{label: human, value: '', limit: 100}]\n"
        f"schedule:\n{lines}\n"
    )


@pytest.mark.parametrize(
    "triggers",
    [
        ["{every: 1m, message: again}"],
        ["{cron: '* * * * *', message: again}"],
        ["{cron: '*/5 9 * * 1', message: monday mornings}"],
        # Each hourly on its own, together 1 minute apart.
        [f"{{cron: '{m} * * * *', message: tick {m}}}" for m in range(0, 4)],
        ["{every: 1h, message: a}", "{every: 2h, message: b}"],  # both at every even hour
    ],
)
async def test_a_posted_agent_waking_itself_too_often_is_refused_with_422(served, triggers):  # noqa: F811
    client, _, _ = served
    refused = await client.post("/v1/agents", content=scheduled(*triggers), headers={"content-type": YAML})
    assert refused.status_code == 422, refused.text
    error = refused.json()["error"]
    assert error["code"] == "trigger_too_frequent" and "at most once every 15 minutes" in error["message"]
    assert (await client.get("/v1/agents/busy")).status_code == 404


async def test_a_posted_agent_within_the_interval_is_made(served):  # noqa: F811
    client, _, _ = served
    # Every :00 and :30 UTC, and 09:15 Paris on weekdays (08:15 UTC in winter): 15 minutes apart at the closest.
    body = scheduled("{every: 30m, message: check in}", "{cron: '15 9 * * 1-5', timezone: Europe/Paris, run: reflect}")
    made = await client.post("/v1/agents", content=body, headers={"content-type": YAML})
    assert made.status_code == 201, made.text


def test_the_shortest_gap_counts_every_trigger_together():
    spec = parse_spec(scheduled("{every: 20m, message: a}", "{cron: '5 * * * *', message: b}"), "<t>")
    assert shortest_gap(spec.schedule, timedelta(minutes=15)) == timedelta(minutes=5)  # :00 and :05
    assert too_frequent(spec.schedule, 0) is None  # 0: any
    assert too_frequent(spec.schedule, 240) is None  # 4 minutes: 5 is enough
