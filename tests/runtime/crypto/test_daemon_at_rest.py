"""The daemon on an encrypted store: a message's text is sealed in the inbox (and its turn's rows), its result is
read back in the clear through the daemon, and no table or file holds the canary."""

from __future__ import annotations

from pagemind.runtime.crypto.keys import Encryption, new_key_text, parse_key
from pagemind.runtime.memory.vectors.stores import close_all
from pagemind.runtime.process.settings import Settings
from pagemind.runtime.state.store import StateStore
from pagemind.scheduler.catalog import AgentCatalog
from pagemind.scheduler.daemon import Daemon
from pagemind.scheduler.daemon_config import DaemonConfig
from tests.runtime.crypto.support import files_holding, postgres_rows_text, session_url
from tests.support.daemon_support import ledger_model, write_agents

CANARY = "quokkadaemon"


async def test_the_inbox_holds_no_message_text_in_the_clear(database_url, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    url = session_url(database_url, home)
    key = new_key_text()
    settings = Settings.from_env({"PAGEMIND_HOME": str(home), "DATABASE_URL": url, "PAGEMIND_ENCRYPTION_KEY": key})
    store = StateStore.open(settings.database_url, Encryption(parse_key(key, "test")))
    daemon = Daemon(
        AgentCatalog(write_agents(tmp_path / "agents"), store), settings, model=ledger_model(), config=DaemonConfig()
    )
    item = await daemon.submit("alice", f"msg 7 about {CANARY}")
    await daemon.start()
    try:
        done = await daemon.wait(item.run_id, timeout=30)
        # The next message while the worker lingers on alice: placed straight with it (the hand-off), the turn's
        # user message stored in the same statement as the inbox row, both sealed.
        second = await daemon.wait((await daemon.submit("alice", f"msg 8 about {CANARY}")).run_id, timeout=30)
        assert second.state == "done" and second.result["reply"] == "ack 8" and CANARY in second.content
    finally:
        await daemon.stop()
        store.engine.dispose()
        close_all()
    assert done.state == "done" and done.result["reply"] == "ack 7" and CANARY in done.content
    assert files_holding(home, CANARY) == []
    if database_url.startswith("postgresql"):
        assert CANARY not in postgres_rows_text(database_url)
