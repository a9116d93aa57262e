"""Generated ids in replays: equal up to a consistent renaming; recorded responses mention the replayed ids."""

import uuid

from pagemind.runtime.agent import Agent
from pagemind.runtime.loop import run_turn
from pagemind.runtime.model.client import ModelRequest
from pagemind.runtime.state.engine import make_engine
from pagemind.runtime.state.store import StateStore
from pagemind.runtime.testing.models import FunctionModel
from pagemind.runtime.testing.responses import tool_call_body
from pagemind.runtime.testing.specs import build_spec
from pagemind.runtime.trace.ids import IdMap
from pagemind.runtime.trace.reader import read_trace
from pagemind.runtime.trace.recorder import record
from pagemind.runtime.trace.replay import replay
from pagemind.tools import ToolError, tool

TICKETS: set[str] = set()


@tool
def open_ticket(title: str) -> str:
    """Open a ticket.

    Args:
        title: What it is about.
    """
    ticket = uuid.uuid4().hex[:12]
    TICKETS.add(ticket)
    return f"Opened ticket {ticket}: {title}"


@tool
def close_ticket(ticket: str) -> str:
    """Close a ticket.

    Args:
        ticket: Its id.
    """
    if ticket not in TICKETS:
        raise ToolError(f"no ticket {ticket}")
    TICKETS.discard(ticket)
    return f"Closed {ticket}"


def test_texts_are_equal_up_to_a_consistent_renaming():
    ids = IdMap()
    assert ids.same_text("Saved as memory be35d0b0 (fact)", "Saved as memory 9c1f04aa (fact)")
    assert ids.forward == {"be35d0b0": "9c1f04aa"}
    assert ids.same_text("memory be35d0b0 again", "memory 9c1f04aa again")
    assert not ids.same_text("memory be35d0b0 again", "memory 77777777 again")  # one id, two names
    assert not ids.same_text("memory a1b2c3d4", "memory 9c1f04aa")  # one name, two ids
    assert not ids.same_text("Saved as memory be35d0b0 (fact)", "Saved as memory 9c1f04aa (todo)")
    assert not ids.same_text("total 1200", "total 1300")  # short numbers are values, not ids
    assert ids.same({"a": ["x be35d0b0"]}, {"a": ["x 9c1f04aa"]})
    assert ids.translate({"arguments": '{"id": "be35d0b0"}'}) == {"arguments": '{"id": "9c1f04aa"}'}


def _ticket_model(request: ModelRequest) -> dict:
    last = request.messages[-2] if request.messages[-1]["role"] == "system" else request.messages[-1]
    if last["role"] == "user":
        return tool_call_body("open_ticket", {"title": "leaky tap"})
    if last["content"].startswith("Opened ticket"):
        return tool_call_body("close_ticket", {"ticket": last["content"].split()[2].rstrip(":")})
    return tool_call_body("send_message", {"message": "Done."})


async def test_a_tool_that_generates_ids_replays_and_later_calls_get_the_new_ids(tmp_path, clock):
    spec = build_spec(
        tools=[
            "send_message",
            "tests.runtime.trace.test_replay_ids:open_ticket",
            "tests.runtime.trace.test_replay_ids:close_ticket",
        ]
    )
    agent = await Agent.load(
        spec,
        model=FunctionModel(_ticket_model),
        store=StateStore(make_engine(f"sqlite:///{tmp_path / 'a.db'}")),
        clock=clock,
    )
    record(agent, path=tmp_path / "tickets.jsonl")
    result = await run_turn(agent, "Please open and close a ticket.")
    assert result.steps == 3 and result.reply == "Done."

    report = await replay(read_trace(tmp_path / "tickets.jsonl"))
    assert report.status == "identical", report.divergence
