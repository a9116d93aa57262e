"""A child process for the turn tests: loads the test agent over DATABASE and runs turns that append to a block.

    python tests/support/turn_child.py DATABASE TAG COUNT [--key-prefix P] [--first N]

Prints `ready` once loaded, waits for one line on stdin (the parent's barrier: every child is loaded before any
turn starts), then runs COUNT turns; turn i sends "TAG message i" and the scripted model appends "TAG-i" to the
`human` block, then replies with send_message("ok TAG-i"). After each acknowledged turn it prints `ack TAG-i`.
With --key-prefix every turn carries the idempotency key "P-i". `PAGEMIND_KILL_AT` (runtime.process.crashpoints) makes it
kill itself at a named point.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from pagemind.runtime.agent import Agent
from pagemind.runtime.model.client import ModelRequest
from pagemind.runtime.state.engine import make_engine
from pagemind.runtime.state.store import StateStore
from pagemind.runtime.testing.models import FunctionModel, by_purpose
from pagemind.runtime.testing.responses import tool_call_body

TOOLS = ["send_message", "core_memory_append", "core_memory_replace", "conversation_search"]


def spec_options() -> dict:
    """The agent every turn test uses: no archival memory (no vector store shared between processes)."""
    return {"human_limit": 4000, "tools": TOOLS}


def respond(request: ModelRequest) -> dict:
    """Append the tag of the newest user message, then acknowledge it (by what the window already holds, so a
    resumed turn goes on where it stopped)."""
    chat = [m for m in request.messages if m["role"] != "system"]
    user = next(m for m in reversed(chat) if m["role"] == "user")
    tag = user["content"].replace(" message ", "-")
    after = chat[len(chat) - 1 - chat[::-1].index(user) + 1 :]
    if not any(m["role"] == "tool" and m.get("content", "").startswith("Appended") for m in after):
        return tool_call_body("core_memory_append", {"label": "human", "content": tag})
    return tool_call_body("send_message", {"message": f"ok {tag}"})


async def main() -> int:
    """Run the turns (see the module docstring)."""
    from pagemind.runtime.testing.specs import build_spec

    parser = argparse.ArgumentParser()
    parser.add_argument("database")
    parser.add_argument("tag")
    parser.add_argument("count", type=int)
    parser.add_argument("--key-prefix")
    parser.add_argument("--first", type=int, default=0)
    args = parser.parse_args()
    store = StateStore(make_engine(args.database))
    agent = await Agent.load(build_spec(**spec_options()), model=FunctionModel(by_purpose(respond)), store=store)
    print("ready", flush=True)
    sys.stdin.readline()
    for i in range(args.first, args.first + args.count):
        key = f"{args.key_prefix}-{i}" if args.key_prefix else None
        reply = await agent.send(f"{args.tag} message {i}", idempotency_key=key, wait=60)
        print(f"ack {args.tag}-{i} {reply}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
