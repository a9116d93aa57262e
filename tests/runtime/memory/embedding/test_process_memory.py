"""An agent process holds only what it uses (issue 11 item 5: ≤ 200 MB with the embedding model loaded): after an
agent is loaded, compiled and has embedded a text, the packages it does not need were never imported and the token
tables are held once. bench/agent_memory.py measures the megabytes; this checks the causes stay away."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).parents[4]

PROBE = """
import asyncio, json, sys
from pathlib import Path
from pagemind.runtime.agent import Agent
from pagemind.runtime.process.settings import Settings
from pagemind.runtime.spec.loading import load_spec
from pagemind.runtime.tokens import encoding

async def main():
    agent = await Agent.load(load_spec(Path("agents/companion.yaml")), settings=Settings.from_env())
    agent.compile()
    agent.recall.embedder.embed(["Lin is allergic to peanuts."])
    loaded = {name.split(".")[0] for name in sys.modules}
    print(json.dumps({"loaded": sorted(loaded), "ranks_in_python": hasattr(encoding(), "_mergeable_ranks"),
                      "one_encoding": encoding() is encoding("o200k_base")}))

asyncio.run(main())
"""


def test_a_working_agent_process_leaves_jsonschema_out_and_holds_the_token_ranks_once(tmp_path):
    env = {**os.environ, "PAGEMIND_HOME": str(tmp_path), "PAGEMIND_LOG_LEVEL": "ERROR"}
    env.pop("DATABASE_URL", None)
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(PROBE)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout.strip().splitlines()[-1])
    loaded = set(data["loaded"])
    assert {"fastembed", "onnxruntime", "tiktoken"} <= loaded  # the probe did load and embed
    # jsonschema (≈ 2 MB) only checks inline block schemas, and the companion's blocks use pydantic models.
    assert "jsonschema" not in loaded
    assert not data["ranks_in_python"] and data["one_encoding"]
