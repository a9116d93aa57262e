"""`pagemind export` and `pagemind import` as a user runs them: subprocesses sharing one PAGEMIND_HOME, and a second
home that receives the file."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).parents[3]
LETTA = ROOT / "tests" / "fixtures" / "agentfiles" / "agentfile-repo__memgpt_agent_memgpt_agent.af"

AGENT_YAML = """
name: keeper
model: {name: gpt-4o-mini}
system: You keep notes.
blocks:
  - {label: human, value: "Name: Lin", limit: 200}
tools: [send_message, archival_memory_insert, archival_search]
"""


def run(home: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "DATABASE_URL", "QDRANT_", "PAGEMIND_"))}
    env["PAGEMIND_HOME"] = str(home)
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)


def cli(home: Path, *args: str) -> subprocess.CompletedProcess:
    return run(home, "-m", "pagemind.runtime.cli.main", *args)


def test_export_import_as_replace_and_letta(tmp_path):
    agent = tmp_path / "keeper.yaml"
    agent.write_text(AGENT_YAML)
    here, there = tmp_path / "here", tmp_path / "there"
    seed = run(
        here,
        "-c",
        textwrap.dedent(f"""
        import asyncio
        from pagemind.runtime.agent import Agent
        async def main():
            a = await Agent.load({str(agent)!r})
            await a.archival.insert("Lin is allergic to peanuts, her doctor is on 13800138000", tags=["health"])
        asyncio.run(main())
    """),
    )
    assert seed.returncode == 0, seed.stderr

    file = tmp_path / "keeper.jsonl"
    exported = cli(here, "export", "keeper", "-o", str(file))
    assert exported.returncode == 0, exported.stderr
    assert f"exported 'keeper' to {file} (jsonl" in exported.stdout
    assert stat.S_IMODE(file.stat().st_mode) == 0o600  # the whole memory, in plain text: its owner's only
    assert json.loads(file.read_text().splitlines()[0])["format"] == "pagemind.agent"

    assert "13800138000" in file.read_text()
    redacted = tmp_path / "keeper.redacted.jsonl"
    written = cli(here, "export", "keeper", "-o", str(redacted), "--redact")
    assert written.returncode == 0 and "(jsonl, redacted," in written.stdout, written.stderr
    assert json.loads(redacted.read_text().splitlines()[0])["redacted"] is True
    assert "13800138000" not in redacted.read_text() and "on [phone#1]" in redacted.read_text()

    imported = cli(there, "import", str(file))
    assert imported.returncode == 0, imported.stderr
    assert "imported agent 'keeper'" in imported.stdout and "embedded with this side's model: 1" in imported.stdout
    found = cli(there, "memory", "search", "keeper", "peanut allergy")
    assert "Lin is allergic to peanuts" in found.stdout, found.stderr

    taken = cli(there, "import", str(file))
    assert taken.returncode == 2 and "--as NEW_NAME" in taken.stderr and "--replace" in taken.stderr
    renamed = cli(there, "import", str(file), "--as", "keeper-2")
    assert renamed.returncode == 0 and "imported agent 'keeper-2'" in renamed.stdout
    replaced = cli(there, "import", str(file), "--replace")
    assert replaced.returncode == 0 and "replaced agent 'keeper'" in replaced.stdout
    listing = cli(there, "agents")
    assert "keeper-2" in listing.stdout and listing.stdout.count("keeper") == 2

    letta = cli(there, "import", str(LETTA), "--as", "from-letta")
    assert letta.returncode == 0, letta.stderr
    assert "imported agent 'from-letta'" in letta.stdout and "note: tool 'memory_insert'" in letta.stdout
    af = tmp_path / "out.af"
    assert cli(there, "export", "from-letta", "-o", str(af)).returncode == 0
    assert json.loads(af.read_text())["agents"][0]["name"] == "from-letta"
    missing = cli(there, "export", "nobody", "-o", str(tmp_path / "x.jsonl"))
    assert missing.returncode == 2 and "no stored agent is called 'nobody'" in missing.stderr
    garbage = tmp_path / "garbage.txt"
    garbage.write_text("hello")
    bad = cli(there, "import", str(garbage))
    assert bad.returncode == 2 and "neither a pagemind.agent export" in bad.stderr
    assert "nor a Letta agent file" in bad.stderr
