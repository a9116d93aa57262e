"""Exactly once under `kill -9` (issue 12, item 6): a daemon process is killed with SIGKILL at seeded points while
messages keep arriving, and the next one resumes.

Each round the test process submits three messages (alternating between a YAML agent and one made from a
template, so two agents run at once) and starts a daemon child (tests/support/daemon_child.py) that drains the inbox with
the crash point of that round armed (`runtime.process.crashpoints`: `NAME@N`, its N-th pass); the child must die there.
The next round's child first takes over what the dead one left (its leases end at once: the `daemons` row names a
pid that is gone) and dies at its own point. A last child runs with no point and drains everything. Then:

- every accepted message is done, once (`attempts` may be more), with the reply of its own turn;
- each agent's `human` block holds each of its messages' markers exactly once, in arrival order (an edit applied
  twice or lost would show);
- each agent's stored user messages are its inbox's messages, once each, in order.

A second suite kills children that submit messages themselves, one after another's turn, so that the agent's
worker lingers in the submitting daemon: with `hand_off` each next message is inserted claimed for it, with its
turn's user message, in one commit; off, the worker is woken to claim it.

Children are forked from a zygote that has imported pagemind once (tests/support/daemon_child.py).
"""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import pytest

from pagemind.runtime.process.settings import Settings
from pagemind.runtime.state.engine import make_engine
from pagemind.runtime.state.store import StateStore
from pagemind.scheduler.catalog import AgentCatalog
from pagemind.scheduler.daemon import Daemon
from tests.support.daemon_support import TEMPLATE, markers, write_agents
from tests.support.zygote import run_child

# The points, one per round, in the daemon (scheduler/dispatcher.py) and in the turn it runs (runtime/).
POINTS = [
    "daemon.agents_leased@1",
    "daemon.item_claimed@1",
    "daemon.item_claimed@2",
    "turn.begin@2",
    "accept.before_commit@1",
    "accept.after_commit@2",
    "turn.prefetch@1",
    "step.before_model@2",
    "step.after_model@3",
    "dispatch.before_tools@1",
    "dispatch.after_tools@2",
    "commit.before_commit@1",
    "commit.after_commit@1",
    "commit.after_commit@2",
    "commit.before_adopt_memory@3",
    "window.before_adopt@4",
    "step.end@2",
    "daemon.turn_done@1",
    "daemon.turn_done@2",
    "daemon.item_finished@1",
    "daemon.item_finished@3",
    "daemon.lease_released@1",
    "daemon.item_claimed@3",
]
# The points on the path of a message submitted to the daemon whose worker lingers on its agent (with `hand_off`
# the submission stores the turn's user message with the item; off, the woken worker claims the item and its turn
# stores the message): a child's first message finds no worker lingering, the rest do.
# A turn here commits once: its memory edit's step is held for the reply's commit (`runtime.loop`); `step.end@3` and
# `step.before_model@4` kill the second message's turn with that step held, in view and not stored.
LINGERING_POINTS = [
    "accept.before_commit@2",
    "accept.after_commit@2",
    "accept.after_commit@3",
    "daemon.item_claimed@2",
    "turn.prefetch@3",
    "step.end@3",
    "step.before_model@4",
    "commit.after_commit@2",
    "window.before_adopt@3",
]
AGENTS = ("alice", "u1")
ROOT = Path(__file__).parents[2]


def test_every_accepted_message_is_done_exactly_once_after_kills(zygote, tmp_path, database_url):
    make_engine(database_url).dispose()  # migrated once here, not in every child
    folder = write_agents(tmp_path / "agents")
    settings = Settings.from_env({"PAGEMIND_HOME": str(tmp_path / "home"), "DATABASE_URL": database_url})
    client = Daemon(AgentCatalog(folder, StateStore.open(settings.database_url)), settings)  # never started
    client.create_agent("u1", template=TEMPLATE)
    accepted: dict[str, list[str]] = {name: [] for name in AGENTS}
    number = 0
    points = POINTS if database_url.startswith("sqlite") else POINTS[::2]  # Postgres: the same paths, half the time
    for point in points:
        for _ in range(3):
            agent = AGENTS[number % 2]
            asyncio.run(client.submit(agent, f"msg {number}"))
            accepted[agent].append(str(number))
            number += 1
        code = run_child(zygote, tmp_path / "home", database_url, folder, point)
        assert code == -signal.SIGKILL, f"{point}: exit code {code} (the point was never reached?)"
    assert run_child(zygote, tmp_path / "home", database_url, folder) == 0

    items = client.inbox.items()
    assert len(items) == number and all(i.state == "done" for i in items), [(i.content, i.state) for i in items]
    assert all(i.result["reply"] == "ack " + i.content.split()[1] for i in items)
    assert any(i.attempts > 1 for i in items)  # the kills did interrupt items
    store = client.store
    for name in AGENTS:
        record = store.get_agent(name)
        human = {b.label: b.value for b in store.load_blocks(record.id, client.catalog.spec_for(name))}["human"]
        assert markers(human) == accepted[name], name
        users = [m.content for m in store.all_messages(record.id) if m.role == "user"]
        assert users == [f"msg {n}" for n in accepted[name]], name


@pytest.mark.parametrize("hand_off", [True, False])
def test_messages_for_a_lingering_worker_are_done_exactly_once_after_kills(zygote, tmp_path, database_url, hand_off):
    """Each child submits four messages to alice in its own process, one after another's turn
    (tests/support/daemon_child.py `converse`), and dies at its point; a last child drains. Every message in the
    inbox (those whose submission returned, and with `hand_off` one that committed as its daemon died) is done
    once, with its edit and user message once each."""
    make_engine(database_url).dispose()
    folder = write_agents(tmp_path / "agents")
    home = tmp_path / "home"
    config = {"hand_off": hand_off}
    for round_, point in enumerate(LINGERING_POINTS):
        first = 4 * round_
        mode = f"converse:alice:{first}:{first + 3}"
        code = run_child(zygote, home, database_url, folder, point, mode=mode, config=config)
        assert code == -signal.SIGKILL, f"{point}: exit code {code} (the point was never reached?)"
    assert run_child(zygote, home, database_url, folder, config=config) == 0

    settings = Settings.from_env({"PAGEMIND_HOME": str(home), "DATABASE_URL": database_url})
    client = Daemon(AgentCatalog(folder, StateStore.open(settings.database_url)), settings)  # never started
    items = client.inbox.items()
    contents = [item.content for item in items]
    assert all(item.state == "done" for item in items), [(i.content, i.state) for i in items]
    assert all(item.result["reply"] == "ack " + item.content.split()[1] for item in items)
    accepted = [f"msg {n}" for n in (home / "accepted").read_text().split()]
    if hand_off:
        assert set(accepted) <= set(contents) and len(contents) <= len(accepted) + len(LINGERING_POINTS)
        # Item and user message are one commit: killed before it, msg 1 left nothing; after it, msg 5 left both.
        assert "msg 1" not in contents and "msg 5" in contents and "msg 5" not in accepted
    else:  # every kill is in a worker, after the submission it serves returned: each item was answered for
        assert contents == accepted
    assert any(item.attempts > 1 for item in items)  # the kills did interrupt items
    record = client.store.get_agent("alice")
    human = {b.label: b.value for b in client.store.load_blocks(record.id, client.catalog.spec_for("alice"))}["human"]
    assert markers(human) == [content.split()[1] for content in contents]
    assert [m.content for m in client.store.all_messages(record.id) if m.role == "user"] == contents


def test_every_seeded_point_is_in_the_code():
    """A renamed point would make its round die elsewhere or not at all: each name appears in the code."""
    root = Path(__file__).parents[2]
    source = "".join(p.read_text() for folder in ("runtime", "scheduler") for p in (root / folder).rglob("*.py"))
    assert all(f'crash_point("{point.split("@")[0]}")' in source for point in POINTS + LINGERING_POINTS)
    assert len(POINTS) >= 20
