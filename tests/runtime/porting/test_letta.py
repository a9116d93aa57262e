"""Letta agent files: every real file in shared/data/agentfiles imports (those whose JSON is encoded twice too),
answers a turn with its blocks pinned and its window's history in the request, and re-imports from its own export
as the same agent; unknown tools are reported, and nothing a file holds is run."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from pagemind.runtime.agent import Agent
from pagemind.runtime.porting.files import export_lines, import_file, read_file
from pagemind.runtime.porting.letta import LETTA_TOOLS, block_label, decoded
from pagemind.runtime.process.settings import Settings
from pagemind.runtime.spec.agent import AgentSpec
from pagemind.runtime.state.engine import make_engine
from pagemind.runtime.state.store import StateStore
from pagemind.runtime.testing.responses import reply_body as reply
from pagemind.tools import BUILTIN_TOOLS

FOLDER = Path(__file__).parents[4] / "shared" / "data" / "agentfiles"
FILES = sorted(FOLDER.glob("*.af")) if FOLDER.is_dir() else []
needs_files = pytest.mark.skipif(not FILES, reason=f"no agent files in {FOLDER}")


def letta_agents(path: Path) -> list[tuple[dict, list[dict], list[dict]]]:
    """(agent, its blocks, its tools) for each agent of a file, read independently of the importer."""
    data = json.loads(path.read_text())
    while isinstance(data, str):
        data = json.loads(data)
    if "agents" not in data:
        return [(data, data["core_memory"], data["tools"])]
    blocks = {b["id"]: b for b in data["blocks"]}
    tools = {t["id"]: t for t in data["tools"]}
    return [(a, [blocks[i] for i in a["block_ids"]], [tools[i] for i in a["tool_ids"]]) for a in data["agents"]]


def window_ids(agent: dict) -> list[int]:
    messages = agent.get("messages") or []
    if "in_context_message_ids" in agent:
        position = {m["id"]: i for i, m in enumerate(messages)}
        return [position[i] for i in agent["in_context_message_ids"]]
    return list(agent.get("in_context_message_indices") or [])


def text_of(message: dict) -> str:
    return "\n".join(p["text"] for p in message.get("content") or [] if p.get("type") == "text")


async def loaded(store: StateStore, name: str, model) -> Agent:
    spec = AgentSpec.model_validate_json(store.stored_spec_json(name), context={"trust": "client"})
    return await Agent.load(spec, model=model, store=store)


@needs_files
@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
async def test_every_file_imports_and_answers_a_turn(path, sqlite_url, scripted_openai):
    store = StateStore(make_engine(sqlite_url))
    reports = import_file(store, Settings.from_env(), path.read_bytes())
    expected = letta_agents(path)
    assert len(reports) == len(expected)
    for report, (letta, blocks, tools) in zip(reports, expected, strict=True):
        notes = "\n".join(report.notes)
        for tool in tools:  # every tool is mapped to ours, or named in the report
            assert tool["name"] in LETTA_TOOLS or tool["name"] in BUILTIN_TOOLS or repr(tool["name"]) in notes
        agent = await loaded(store, report.name, scripted_openai.client())
        by_label = {b.label: b for b in agent.memory.blocks}
        assert sorted(by_label) == sorted({block_label(b["label"]) for b in blocks})
        for block in blocks:
            ours = by_label[block_label(block["label"])]
            assert ours.value == block["value"] and ours.read_only == bool(block.get("read_only"))
            assert ours.limit >= len(block["value"]) and ours.description == (block.get("description") or "")
        assert agent.spec.model.name == letta["llm_config"]["model"]
        if (letta.get("system") or "").strip():
            assert agent.spec.system == letta["system"].strip()

        messages = letta.get("messages") or []
        window = window_ids(letta)
        in_view = [text_of(messages[i]) for i in window[1:] if messages[i]["role"] == "user" and text_of(messages[i])]
        recall_only = [
            text_of(m)
            for i, m in enumerate(messages)
            if i not in window and m["role"] == "user" and text_of(m) and text_of(m) not in in_view
        ]
        scripted_openai.add(reply("Hello again."))
        assert await agent.send("ping from the test") == "Hello again."
        body = scripted_openai.requests[-1]
        wire = json.dumps(body["messages"], ensure_ascii=False)
        prompt = body["messages"][0]["content"]
        for block in blocks:  # pinned: every block's value is in the prompt
            assert (
                json.dumps(block["value"][:60], ensure_ascii=False)[1:-1].replace("</", "<\\\\/")
                in json.dumps(prompt, ensure_ascii=False)
                or block["value"][:60].replace("</", "<\\/") in prompt
            )
        for text in in_view:  # the window's history is in the request; recall-only messages are not
            assert json.dumps(text, ensure_ascii=False)[1:-1] in wire
        for text in recall_only:
            assert json.dumps(text, ensure_ascii=False)[1:-1] not in wire
        assert body["messages"][-2] == {"role": "user", "content": body["messages"][-2]["content"]}
        assert "ping from the test" in body["messages"][-2]["content"]


def stored(store: StateStore, name: str) -> dict:
    record = store.get_agent(name)
    spec = json.loads(store.stored_spec_json(name))
    spec.pop("name")
    messages = [
        (
            m.role,
            m.content,
            [(c.id, c.name, c.arguments) for c in m.tool_calls],
            m.tool_call_id,
            m.name,
            m.is_error,
            m.in_context,
            m.created_at,
        )
        for m in store.all_messages(record.id)
    ]
    as_spec = AgentSpec.model_validate({**spec, "name": name}, context={"trust": "client"})
    blocks = [(b.label, b.value, b.limit, b.description, b.read_only) for b in store.load_blocks(record.id, as_spec)]
    return {"spec": spec, "messages": messages, "blocks": blocks, "summary": record.summary}


@needs_files
@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_an_export_reimports_as_the_same_agent(path, database_url):
    store = StateStore(make_engine(database_url))
    first = import_file(store, Settings.from_env(), path.read_bytes())[0]
    written = "".join(export_lines(store, first.name, "af"))
    assert read_file(written.encode()).format == "af"
    again = import_file(store, Settings.from_env(), written.encode(), name="again")[0]
    assert stored(store, "again") == stored(store, first.name)
    assert not [n for n in again.notes if "not imported" in n]  # all of ours maps back


@needs_files
def test_detected_by_content_not_by_name(tmp_path, sqlite_url):
    twice = next(p for p in FILES if isinstance(json.loads(p.read_text()), str))  # JSON encoded twice
    renamed = tmp_path / "agent.txt"
    shutil.copy(twice, renamed)
    assert isinstance(decoded(renamed.read_text()), dict)
    [report] = import_file(StateStore(make_engine(sqlite_url)), Settings.from_env(), renamed.read_bytes(), name="x")
    assert report.name == "x"


async def test_a_files_tool_code_never_runs(tmp_path, sqlite_url, scripted_openai):
    canary = tmp_path / "ran"
    code = f"def pwn(x: str) -> str:\n    open({str(canary)!r}, 'w').write('ran')\n    return x\n"
    document = {
        "agents": [
            {
                "id": "agent-0",
                "name": "innocent",
                "system": "You help.",
                "llm_config": {"model": "gpt-4o-mini", "context_window": 8192},
                "block_ids": [],
                "tool_ids": ["tool-0"],
                "messages": [],
                "in_context_message_ids": [],
                "tool_rules": [],
            }
        ],
        "blocks": [],
        "tools": [
            {"id": "tool-0", "name": "pwn", "tool_type": "custom", "source_code": code, "json_schema": {"name": "pwn"}}
        ],
        "groups": [],
        "files": [],
        "sources": [],
        "mcp_servers": [],
    }
    store = StateStore(make_engine(sqlite_url))
    [report] = import_file(store, Settings.from_env(), json.dumps(document).encode())
    assert any("'pwn'" in n and "not imported" in n and "not run" in n for n in report.notes)
    agent = await loaded(store, "innocent", scripted_openai.client())
    assert "pwn" not in agent.tools
    scripted_openai.add(reply("ok"))
    await agent.send("call pwn")
    assert not canary.exists()
    assert all(t["function"]["name"] != "pwn" for t in scripted_openai.requests[-1].get("tools", []))


def test_an_odd_file_still_imports_and_says_what_it_changed(sqlite_url):
    """The general case, not the files at hand: the older schema with text content, numbers as text, a label and a
    name pagemind would not take, a value over its limit, no system prompt, no model settings, a `function` role."""
    document = {
        "name": "Odd Agent / v2",
        "core_memory": [
            {"label": "Human Notes", "value": "x" * 50, "limit": "10", "description": None},
            {"label": "human-notes", "value": "second", "limit": None},
        ],
        "messages": [
            {"role": "system", "text": "compiled"},
            {"role": "user", "content": "hello", "created_at": "2025-01-02T03:04:05"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "c1", "function": {"name": "lookup", "arguments": {"q": "x"}}}],
            },
            {"role": "function", "tool_call_id": "c1", "content": "found"},
            {"role": "critic", "content": "?"},
        ],
        "in_context_message_indices": [0, 1, 2, 3],
        "tools": [{"name": "lookup", "source_code": "import os"}],
        "llm_config": {"context_window": "not a number", "temperature": "warm"},
    }
    store = StateStore(make_engine(sqlite_url))
    [report] = import_file(store, Settings.from_env(), json.dumps(json.dumps(document)).encode())
    assert report.name == "Odd-Agent-v2" and report.counts["message"] == 3
    notes = "\n".join(report.notes)
    for said in (
        "'Human Notes' is stored as 'human_notes'",
        "'human-notes' is stored as 'human_notes_2'",
        "over its limit 10: raised",
        "no system prompt",
        "'lookup'",
        "unknown role",
    ):
        assert said in notes, said
    messages = store.all_messages(report.agent_id)
    assert [(m.role, m.in_context) for m in messages] == [("user", True), ("assistant", True), ("tool", True)]
    assert messages[1].tool_calls[0].arguments == '{"q": "x"}' and messages[2].name == "lookup"
    assert messages[0].created_at.isoformat() == "2025-01-02T03:04:05+00:00"
