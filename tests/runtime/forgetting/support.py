"""What the forget and mute tests share: a scripted model that files what the user says everywhere an agent keeps
text and calls `forget` / `mute_topic` when asked, agents that use it, and byte and table scans."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import sqlalchemy

from pagemind.runtime.agent import Agent
from pagemind.runtime.process.settings import Settings
from pagemind.runtime.spec.agent import AgentSpec
from pagemind.runtime.state.engine import make_engine
from pagemind.runtime.state.store import StateStore
from tests.support.model_server import last_turn_message, last_user_text, tool_calls

AGENT_YAML = """
name: {name}
model: {{name: gpt-4o-mini, base_url: "{url}", api_key_env: OPENAI_API_KEY}}
system: You keep notes.
tools: [send_message, memory_rethink, archival_memory_insert, archival_search, conversation_search, forget,
  mute_topic, unmute_topic]
blocks:
  - label: human
    limit: 4000
    value: ""
"""


def completion(body: dict[str, Any]) -> dict[str, Any]:
    """To "forget X": `forget(X)`; to "mute X": `mute_topic(X)`; to anything else: its text into the `human` block and
    archival memory. To the tools' results: `send_message` saying it is done (never repeating the user)."""
    said = last_user_text(body)
    if last_turn_message(body).get("role") == "user":
        if said.startswith("forget "):
            return tool_calls(("forget", {"query": said.removeprefix("forget ")}))
        if said.startswith("mute "):
            return tool_calls(("mute_topic", {"topic": said.removeprefix("mute ")}))
        return tool_calls(
            ("memory_rethink", {"label": "human", "new_value": f"Notes: {said}"}),
            ("archival_memory_insert", {"content": f"The user said: {said}"}),
        )
    return tool_calls(("send_message", {"message": "Done."}))


async def load(url: str, database_url: str, home: Path, name: str = "keeper") -> Agent:
    """The agent on the scripted model, its turns recorded under `home/traces/NAME/`."""
    from pagemind.runtime.spec.loading import parse_spec
    from pagemind.runtime.trace.recorder import record, traces_dir

    spec: AgentSpec = parse_spec(AGENT_YAML.format(name=name, url=url))
    settings = Settings.from_env().model_copy(update={"database_url": database_url, "home": home})
    agent = await Agent.load(spec, settings=settings, store=StateStore(make_engine(database_url)))
    record(agent, directory=traces_dir(home, name))
    return agent


def files_holding(home: Path, canary: str) -> list[str]:
    """Every file under `home` whose bytes hold the canary (UTF-8), relative to `home`."""
    needle = canary.encode("utf-8")
    return sorted(str(p.relative_to(home)) for p in home.rglob("*") if p.is_file() and needle in p.read_bytes())


def tables_holding(database_url: str, canary: str) -> list[str]:
    """Every table of the database with a row that holds the canary."""
    engine = sqlalchemy.create_engine(database_url)
    found = []
    with engine.connect() as conn:
        for name in sqlalchemy.inspect(conn).get_table_names():
            rows = conn.execute(sqlalchemy.text(f'SELECT * FROM "{name}"')).all()
            if any(canary in repr(tuple(row)) for row in rows):
                found.append(name)
    engine.dispose()
    return found
