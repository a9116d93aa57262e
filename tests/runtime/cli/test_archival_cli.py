"""`pagemind memory search|archival|forget` as a user runs them: subprocesses sharing one PAGEMIND_HOME."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).parents[3]

AGENT_YAML = """
name: keeper
model: {name: gpt-4o-mini}
system: You keep notes.
tools: [send_message, archival_memory_insert, archival_search, conversation_search]
"""


def run(tmp_path: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "DATABASE_URL", "QDRANT_", "PAGEMIND_"))}
    env.update({"PAGEMIND_HOME": str(tmp_path / "home")})
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=180, input=stdin
    )


def test_memory_archival_search_and_forget(tmp_path):
    agent = tmp_path / "keeper.yaml"
    agent.write_text(AGENT_YAML)
    seed = run(
        tmp_path,
        "-c",
        textwrap.dedent(f"""
        import asyncio
        from datetime import datetime, timezone
        from pagemind.runtime.agent import Agent
        from pagemind.runtime.messages import Message
        async def main():
            a = await Agent.load({str(agent)!r})
            await a.archival.insert("Lin is allergic to peanuts", kind="constraint", tags=["health"], importance=0.9)
            await a.archival.insert("Lin's favourite colour is blue", tags=["preferences"])
            await a.archival.insert("Lin's favourite colour is green", tags=["preferences"])
            a.store.append_messages(a.record.id, [Message("user", "I booked the flight to Lyon for my sister's wedding",
                                                          datetime(2026, 5, 1, tzinfo=timezone.utc), in_context=False),
                                                  Message("user", "zebra " * 40_000,
                                                          datetime(2026, 5, 2, tzinfo=timezone.utc), in_context=False)])
        asyncio.run(main())
    """),
    )
    assert seed.returncode == 0, seed.stderr

    listing = run(tmp_path, "-m", "pagemind.runtime.cli.main", "memory", "archival", "keeper")
    assert listing.returncode == 0, listing.stderr
    assert listing.stdout.startswith("2 live archival memories; tags: health, preferences")
    assert "constraint importance 0.90" in listing.stdout and "Lin is allergic to peanuts" in listing.stdout
    assert "colour is blue" not in listing.stdout

    everything = run(tmp_path, "-m", "pagemind.runtime.cli.main", "memory", "archival", "keeper", "--all")
    blue = next(line for line in everything.stdout.splitlines() if "[superseded by" in line).split()[0]
    history = run(tmp_path, "-m", "pagemind.runtime.cli.main", "memory", "archival", "keeper", "--history", blue)
    assert "insert" in history.stdout and "superseded" in history.stdout and "green" in history.stdout

    found = run(tmp_path, "-m", "pagemind.runtime.cli.main", "memory", "search", "keeper", "peanut allergy")
    assert found.returncode == 0, found.stderr
    archival_part, recall_part = found.stdout.split("recall memory")
    assert "Lin is allergic to peanuts" in archival_part.splitlines()[1]
    wedding = run(
        tmp_path, "-m", "pagemind.runtime.cli.main", "memory", "search", "keeper", "sister wedding", "--in", "recall"
    )
    assert "flight to Lyon" in wedding.stdout

    peanut_id = next(line for line in listing.stdout.splitlines() if "constraint" in line).split()[0]
    huge = run(tmp_path, "-m", "pagemind.runtime.cli.main", "memory", "search", "keeper", "zebra", "--in", "recall")
    assert huge.returncode == 0 and len(huge.stdout) < 5_000 and "237,999 more characters not shown" in huge.stdout
    empty = run(tmp_path, "-m", "pagemind.runtime.cli.main", "memory", "search", "keeper", "")
    assert empty.returncode == 2 and "the search query is empty" in empty.stderr

    short = run(tmp_path, "-m", "pagemind.runtime.cli.main", "memory", "forget", "keeper", peanut_id[:1], "--yes")
    assert short.returncode == 2 and "at least 4 characters" in short.stderr
    unconfirmed = run(tmp_path, "-m", "pagemind.runtime.cli.main", "memory", "forget", "keeper", peanut_id)
    assert unconfirmed.returncode == 2 and "not confirmed; nothing deleted" in unconfirmed.stderr
    forgot = run(tmp_path, "-m", "pagemind.runtime.cli.main", "memory", "forget", "keeper", peanut_id, stdin="y\n")
    assert forgot.returncode == 0 and forgot.stdout.startswith("forgot " + peanut_id)
    after = run(tmp_path, "-m", "pagemind.runtime.cli.main", "memory", "archival", "keeper", "--all")
    assert "peanuts" not in after.stdout and after.stdout.startswith("1 live archival memories")
    again = run(
        tmp_path, "-m", "pagemind.runtime.cli.main", "memory", "search", "keeper", "peanut allergy", "--in", "archival"
    )
    assert "peanuts" not in again.stdout

    missing = run(tmp_path, "-m", "pagemind.runtime.cli.main", "memory", "forget", "keeper", "ffffffff", "--yes")
    assert missing.returncode == 2 and "no single archival memory" in missing.stderr
    core = run(tmp_path, "-m", "pagemind.runtime.cli.main", "memory", "keeper")  # the core-memory command still works
    assert core.returncode == 0, core.stderr
