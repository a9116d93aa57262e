"""A run taken over by the daemon that watched it (Postgres): daemon Y runs the first attempt and relays its events
to X, which watches; Y stops mid-turn, and X claims the second attempt and runs it itself. X's subscribers, the one
that watched from the start and one that comes during the second attempt, get the first attempt's relayed events,
then the second attempt's, each once and in order (before, X's own run hid what the relay held)."""

from __future__ import annotations

import asyncio

import pytest

from pagemind.scheduler.streams.relay import first_seq
from tests.scheduler.streams.test_daemon_relay import TURN, bodiless, collect, gated_ledger, make_daemon
from tests.support.daemon_support import write_agents

pytestmark = [pytest.mark.postgres, pytest.mark.parametrize("database_url", ["postgres"], indirect=True)]


async def test_the_watching_daemon_that_takes_a_run_over_streams_both_attempts(database_url, tmp_path):
    folder = write_agents(tmp_path / "agents")
    x_model, y_model = gated_ledger(), gated_ledger()
    x = make_daemon(database_url, folder, x_model)  # not started yet: Y claims the run
    y = make_daemon(database_url, folder, y_model)
    try:
        item = await x.submit("alice", "msg 1")
        early = x.events(item.run_id)  # X watches: Y relays its attempt
        await y.start()
        await y_model.entered.wait()  # step 1 held (a memory edit, stored with step 2), step 2 waits for the model
        await y.stop(grace_s=0)  # the step is cancelled, what Y kept is written, the item goes back to pending
        await x.start()  # X takes the run over
        await x_model.entered.wait()  # the second attempt redoes step 1 (never stored) and waits at step 2
        late = x.events(item.run_id)
        x_model.gate.set()
        (got, seqs), (got_late, late_seqs) = await asyncio.gather(collect(early), collect(late))
        assert (await x.wait(item.run_id, 30)).result["reply"] == "ack 1"
    finally:
        await x.stop()
    kinds = [e.type for e in got]
    cut = next(i for i, seq in enumerate(seqs) if seq > first_seq(2))
    assert kinds[:cut] == TURN[:8] and kinds[cut:] == TURN
    assert all(first_seq(1) < seq < first_seq(2) for seq in seqs[:cut]) and seqs == sorted(set(seqs))
    assert late_seqs == seqs and bodiless(got_late) == bodiless(got)
