"""The files' half of a rotation: the vector stores' payload texts and the trace files, re-sealed under the new key.

A point's text is opened (old key) and written back sealed under the new key; done again on a rerun, which
changes nothing but the nonce. A trace file is rewritten whole beside itself and renamed over it (atomic): a kill
leaves either the old file or the new one, never half of each; a file whose lines are all under the new key
already is left as it is.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from pagemind.runtime.crypto.cipher import PREFIX, TextCipher, key_id_of
from pagemind.runtime.memory.vectors.backend import AgentStore
from pagemind.runtime.memory.vectors.records import MemoryFilter
from pagemind.runtime.memory.vectors.stores import every_store
from pagemind.runtime.process.crashpoints import crash_point
from pagemind.runtime.process.settings import Settings
from pagemind.runtime.trace.format import TRACE_SUFFIX


def reseal_points(settings: Settings, agent_ids: Sequence[int], cipher: TextCipher) -> int:
    """Re-seal every point's text of the agents in every vector store of the settings; how many points."""
    count = 0
    for backend in every_store(settings.home, settings.qdrant_url, settings.qdrant_api_key):
        backend.seal_with(cipher)
        for agent_id in agent_ids:
            store = AgentStore(backend, agent_id)
            for record in store.all(MemoryFilter()):
                store.set_payload(record.id, {"text": record.text})
                count += 1
                crash_point("rotate.point")
    return count


def trace_files(home: Path) -> list[Path]:
    """Every trace under the state folder's `traces/`."""
    root = home / "traces"
    return sorted(root.rglob(f"*{TRACE_SUFFIX}")) if root.exists() else []


def reseal_trace(path: Path, cipher: TextCipher) -> bool:
    """Rewrite a trace with every line sealed under `cipher`'s primary key (a torn last line that does not open is
    dropped, as a reader drops it); False when it was already so."""
    lines = path.read_bytes().split(b"\n")
    torn = lines.pop()
    if all(key_id_of(line.decode("ascii", "replace")) == cipher.key_id for line in lines if line) and not torn:
        return False
    out: list[bytes] = []
    for line in [*lines, torn] if torn else lines:
        if not line:
            continue
        try:
            plain = cipher.open_bytes(line) if line.startswith(PREFIX.encode()) else line
        except Exception:
            if line is torn:
                continue  # cut off mid-write
            raise
        out.append(cipher.seal_bytes(plain) + b"\n")
    fresh = path.with_name(path.name + ".rotating")
    with open(fresh, "wb") as file:
        file.write(b"".join(out))
        file.flush()
        os.fsync(file.fileno())
    os.replace(fresh, path)
    crash_point("rotate.trace")
    return True
