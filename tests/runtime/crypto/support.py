"""An encrypted agent session shared by the crypto tests: a scripted agent that puts a canary word in a message, a
block edit, an archival memory, a summary, an extracted fact and a trace, on SQLite or PostgreSQL, with a data key."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlalchemy

from pagemind.runtime.agent import Agent
from pagemind.runtime.crypto.keys import Encryption, new_key_text, parse_key
from pagemind.runtime.memory.vectors.stores import close_all
from pagemind.runtime.model.client import ModelRequest
from pagemind.runtime.process.settings import Settings
from pagemind.runtime.state.store import StateStore
from pagemind.runtime.testing.clock import ManualClock
from pagemind.runtime.testing.models import FunctionModel
from pagemind.runtime.testing.responses import call, reply_body, tool_call_body, tool_calls_body
from pagemind.runtime.testing.specs import build_spec
from pagemind.runtime.trace.recorder import record

CANARIES = {
    "user message": "wombatcanary",
    "block edit": "numbatcanary",
    "archival memory": "sertralinecanary",
    "summary": "wallabycanary",
    "extracted fact": "possumcanary",
}
FILLER = "The harbour was calm and the ferries came and went under a grey sky all afternoon. " * 12
TURNS = [
    f"Hi, I'm Lin. My grandmother is called {CANARIES['user message']}.",
    f"REMEMBER: I take {CANARIES['archival memory']} every morning for my heart.",
    *(f"Day note {n}: nothing much. {FILLER}" for n in range(6)),
]


def _step(request: ModelRequest) -> dict[str, Any]:
    last = [m for m in request.messages if m["role"] != "system"][-1]
    if last["role"] == "tool":
        return tool_call_body("send_message", {"message": "Noted."})
    text = str(last.get("content") or "")
    if text.startswith("Hi"):
        edit = call("core_memory_append", {"label": "human", "content": f"Grandma: {CANARIES['block edit']}."})
        return tool_calls_body(edit)
    if text.startswith("REMEMBER"):
        fact = {"content": f"Lin takes {CANARIES['archival memory']} daily for her heart."}
        return tool_call_body("archival_memory_insert", fact)
    return reply_body("That sounds like a calm day.")


def respond(request: ModelRequest) -> dict[str, Any]:
    """The scripted model: steps as above, a summary and an extracted fact with their canaries."""
    match request.purpose:
        case "summarize":
            return reply_body(f"Lin talked about the harbour ({CANARIES['summary']}).")
        case "extract":
            fact = {"text": f"Lin watches the ferries with {CANARIES['extracted fact']}.", "importance": 0.8}
            return reply_body(json.dumps({"facts": [fact]}))
        case "step":
            return _step(request)
        case _:
            return reply_body("{}")


SPEC = build_spec(
    "vault",
    human="Name: Lin.",
    human_limit=400,
    context_window=2600,
    max_steps_per_turn=4,
    tools=["send_message", "core_memory_append", "archival_memory_insert", "archival_search", "conversation_search"],
)


@dataclass
class Session:
    """Where an encrypted session's state lives, and its key."""

    home: Path
    database_url: str
    key: str

    def settings(self, key: str | None = "same") -> Settings:
        """Settings for this session's stores, with its key (or `key`: another one, or None for none)."""
        given = self.key if key == "same" else key
        return Settings(home=self.home, database_url=self.database_url, encryption_key=given)

    def encryption(self, key: str | None = "same") -> Encryption:
        """The `Encryption` of `settings(key)`."""
        given = self.key if key == "same" else key
        return Encryption(parse_key(given, "test") if given else None)

    def env(self, key: str | None = "same") -> dict[str, str]:
        """Environment variables for a CLI child process on this session's stores."""
        import os

        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "DATABASE_URL", "QDRANT_"))}
        env.pop("PAGEMIND_ENCRYPTION_KEY", None)
        env.update(PAGEMIND_HOME=str(self.home), DATABASE_URL=self.database_url)
        given = self.key if key == "same" else key
        if given:
            env["PAGEMIND_ENCRYPTION_KEY"] = given
        return env


def session_url(database_url: str, home: Path) -> str:
    """The fixture's database, its SQLite file moved under `home` (so every file of the session is there)."""
    return f"sqlite:///{home / 'pagemind.db'}" if database_url.startswith("sqlite") else database_url


async def run_session(home: Path, database_url: str, key: str | None = None) -> Session:
    """Run the scripted conversation with a data key (a fresh one unless given), one trace per turn."""
    session = Session(home, session_url(database_url, home), key or new_key_text())
    settings = session.settings()
    clock = ManualClock()
    store = StateStore.open(settings.database_url, session.encryption())
    agent = await Agent.load(SPEC, model=FunctionModel(respond), store=store, settings=settings, clock=clock)
    recorder = record(agent, directory=home / "traces" / agent.name)
    try:
        for text in TURNS:
            clock.advance(minutes=3)
            await agent.send(text)
    finally:
        recorder.close()
        store.engine.dispose()
        close_all()  # the embedded vector store: a CLI child process opens it next
    return session


def postgres_rows_text(database_url: str) -> str:
    """Every row of every table of the database's schema, as Postgres prints it (`row::text`)."""
    engine = sqlalchemy.create_engine(database_url)
    try:
        with engine.connect() as conn:
            tables = conn.execute(
                sqlalchemy.text("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")
            ).scalars()
            return "\n".join(
                str(row[0])
                for table in list(tables)
                for row in conn.execute(sqlalchemy.text(f'SELECT t::text FROM "{table}" t'))
            )
    finally:
        engine.dispose()


def files_holding(home: Path, word: str) -> list[str]:
    """Every file under `home` whose raw bytes hold `word` (any case)."""
    needle = word.lower().encode()
    return [str(p.relative_to(home)) for p in home.rglob("*") if p.is_file() and needle in p.read_bytes().lower()]
