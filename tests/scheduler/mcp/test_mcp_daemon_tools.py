"""An agent in the daemon's served folder uses an MCP server (tests/support/mcp_server.py, started by the daemon
as a subprocess): a call that hangs is a tool error within the server's timeout and the turn still replies; the
next message's turn calls a tool on a new session and replies with its result; an agent dropped from the pool ends
its session."""

from __future__ import annotations

import sys
from pathlib import Path

from pagemind.runtime.testing.models import FunctionModel, by_purpose
from pagemind.runtime.testing.responses import tool_call_body
from tests.scheduler.test_daemon_core import make_daemon
from tests.support.daemon_support import write_agents

SERVER = Path(__file__).parents[2] / "support" / "mcp_server.py"


def step(request):
    """Call the tool the user names (`call NAME`), then reply with what it answered."""
    last_user = max(i for i, m in enumerate(request.messages) if m["role"] == "user")
    results = [m for m in request.messages[last_user:] if m["role"] == "tool"]
    if results:
        return tool_call_body("send_message", {"message": f"got: {results[-1]['content']}"})
    name = request.messages[last_user]["content"].split()[-1]
    return tool_call_body(name, {"a": 19, "b": 23} if name == "add" else {})


async def test_a_served_agent_calls_its_mcp_server_and_survives_a_hung_call(tmp_path, sqlite_url):
    server = {"mcp": {"command": sys.executable, "args": [str(SERVER)], "timeout_s": 1}}
    folder = write_agents(tmp_path / "agents", tools=["send_message", server])
    daemon = make_daemon(sqlite_url, folder, FunctionModel(by_purpose(step)))
    await daemon.start()
    try:
        hung = await daemon.wait((await daemon.submit("alice", "call hang")).run_id, timeout=60)
        added = await daemon.wait((await daemon.submit("alice", "call add")).run_id, timeout=60)  # a new session
        agent = daemon.pool.loaded("alice")
        assert agent is not None and agent.mcp is not None
        connection = agent.mcp.connections[0]
        assert connection.is_open
        daemon.pool.forget("alice")
        await agent.mcp.close()  # what `forget` started in the background, awaited here
        assert not connection.is_open
    finally:
        await daemon.stop()
    assert added.result["reply"] == "got: 42"
    assert hung.state == "done" and "did not answer tool hang within 1 s" in hung.result["reply"]
