"""The embedded store across processes: persistence, one writer with a clear error, a crash mid-insert."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pagemind.runtime.memory.archival.memory import ArchivalService
from pagemind.runtime.memory.vectors.edge import EdgeBackend
from pagemind.runtime.memory.vectors.records import MemoryFilter, StoreLocked
from pagemind.runtime.state.engine import make_engine
from pagemind.runtime.testing.embedder import FakeEmbedder
from tests.runtime.memory.archival.test_archival import DIM, run

ROOT = Path(__file__).parents[4]


def python(code: str, home: Path, **kwargs) -> subprocess.Popen | subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("QDRANT_", "DATABASE_URL", "PAGEMIND_EMBEDDING"))}
    env.update({"PAGEMIND_HOME": str(home), "PAGEMIND_LOG_LEVEL": "ERROR"})
    script = textwrap.dedent(code)
    if kwargs.pop("background", False):
        return subprocess.Popen(
            [sys.executable, "-c", script], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
    return subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=180
    )


AGENT = """
import asyncio, json, sys
from pagemind.runtime.agent import Agent
from pagemind.runtime.spec.agent import AgentSpec
from pagemind.runtime.process.logs import configure_logging
configure_logging("ERROR")

def spec(name):
    return AgentSpec.model_validate({"name": name, "model": {"name": "m"}, "system": "s",
                                     "tools": ["send_message", "archival_memory_insert", "archival_search"]})
"""


def test_insert_then_search_from_a_fresh_process_with_the_real_model(tmp_path):
    """The shipped model end to end: saved in one process, found by meaning in the next, invisible to others."""
    write = python(
        AGENT
        + """
async def main():
    agent = await Agent.load(spec("alice"))
    saved = await agent.archival.insert("Lin's sister Mei lives in Lyon and teaches piano", tags=["family"])
    copy = await agent.archival.insert("Lin's sister Mei lives in Lyon and teaches piano.")
    print(json.dumps([saved.action, copy.action, saved.id == copy.id]))
asyncio.run(main())
""",
        tmp_path,
    )
    assert write.returncode == 0, write.stderr
    assert json.loads(write.stdout.splitlines()[-1]) == ["inserted", "duplicate", True]
    read = python(
        AGENT
        + """
async def main():
    alice, bob = await Agent.load(spec("alice")), await Agent.load(spec("bob"))
    hits = await alice.archival.search("Which city does Mei live in?")
    print(json.dumps({"alice": [h.text for h in hits], "stats": alice.archival.stats(),
                      "bob": [h.text for h in await bob.archival.search("Which city does Mei live in?")],
                      "unrelated": [h.text for h in await alice.archival.search("quantum chromodynamics lattice")]}))
asyncio.run(main())
""",
        tmp_path,
    )
    assert read.returncode == 0, read.stderr
    result = json.loads(read.stdout.splitlines()[-1])
    assert result["alice"] == ["Lin's sister Mei lives in Lyon and teaches piano"]
    assert result["stats"] == [1, ["family"]] and result["bob"] == [] and result["unrelated"] == []


def test_a_second_process_gets_a_clear_error_naming_the_holder(tmp_path):
    holder = EdgeBackend(tmp_path / "shard", DIM)
    try:
        result = python(
            f"""
from pagemind.runtime.memory.vectors.edge import EdgeBackend
from pagemind.runtime.memory.vectors.records import StoreLocked
try:
    EdgeBackend({str(tmp_path / "shard")!r}, {DIM})
except StoreLocked as exc:
    print(exc)
""",
            tmp_path,
        )
        assert result.returncode == 0, result.stderr
        message = result.stdout
        assert (
            f"in use by process {os.getpid()}" in message and "QDRANT_URL" in message and "stop that process" in message
        )
        with pytest.raises(StoreLocked):  # a second handle in the same process is refused the same way
            EdgeBackend(tmp_path / "shard", DIM)
    finally:
        holder.close()
    EdgeBackend(tmp_path / "shard", DIM).close()  # free again once the holder closed


CRASHER = """
import asyncio, sys
from pathlib import Path
from pagemind.runtime.memory.archival.memory import ArchivalService
from pagemind.runtime.memory.vectors.edge import EdgeBackend
from pagemind.runtime.state.engine import make_engine
from pagemind.runtime.testing.embedder import FakeEmbedder
from tests.runtime.memory.archival.test_archival import DIM
from pagemind.runtime.process.logs import configure_logging
configure_logging("ERROR")

home = Path(sys.argv[1])
backend = EdgeBackend(home / "shard", DIM)
service = ArchivalService(1, engine=make_engine(f"sqlite:///{home / 'state.db'}"),
                          open_backend=lambda: backend, embedder=FakeEmbedder())

async def main():
    for n in range(100000):
        result = await service.insert(f"Memory number {n}: Lin visited place {n}", kind="episode")
        print("ack", result.id, flush=True)  # only after insert returned: durable
asyncio.run(main())
"""


def test_reopen_after_a_crash_mid_insert_loses_nothing_acknowledged(tmp_path):
    child = subprocess.Popen(
        [sys.executable, "-c", CRASHER, str(tmp_path)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    acked = []
    try:
        for line in child.stdout:
            if not line.startswith("ack "):
                continue
            acked.append(line.split()[1])
            if len(acked) == 25:
                break
        child.send_signal(signal.SIGKILL)  # mid-loop: the next insert is in flight
    finally:
        child.wait(timeout=30)
    assert len(acked) == 25, child.stderr.read()
    backend = EdgeBackend(tmp_path / "shard", DIM)  # reopens: WAL replayed, lock free
    try:
        service = ArchivalService(
            1,
            engine=make_engine(f"sqlite:///{tmp_path / 'state.db'}"),
            open_backend=lambda: backend,
            embedder=FakeEmbedder(),
        )
        stored = {r.id for r in service.store.all()}
        assert set(acked) <= stored and len(stored) <= len(acked) + 1  # at worst the unacknowledged one
        assert set(acked) <= {m.id for m in service.list()}
        assert service.store.count(MemoryFilter()) == len(stored)
        after = run(service.insert("Lin adopted a cat named Miso", kind="episode"))
        assert after.action == "inserted" and len(run(service.search("Miso cat"))) >= 1
    finally:
        backend.close()
