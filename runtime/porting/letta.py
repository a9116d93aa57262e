"""Letta agent files (`.af`): read into bundles, with a report of what did not map; written from a bundle.

Two schemas are read, told apart by their keys (the file's JSON may be a string holding the JSON: decoded until
it is an object):

- the current one (`AgentFileSchema`, Letta 0.8 on): `agents`, `blocks`, `tools`, `groups`, `files`, `sources`,
  `mcp_servers` at the top level, each agent naming its blocks and tools by id, with its `messages` and
  `in_context_message_ids`;
- the older one-agent file: the agent's fields at the top level with `core_memory` (its blocks), `tools`,
  `messages` and `in_context_message_indices` (positions in `messages`).

What maps: the agent's name (made a valid pagemind name), system prompt, model name, window, output limit and
temperature; core blocks with their labels (made valid: `system/persona` becomes `system_persona`), values,
limits (raised to fit a value over its limit), descriptions and read-only flags; every message, in order, with its
tool calls and returns, and whether it is in the window or only in recall (`runtime.porting.letta_messages`:
Letta's compiled system message, the first in its window, is left out: pagemind compiles its own from the system
prompt and the blocks); tools whose Letta names have a pagemind built-in (`LETTA_TOOLS`). What does not is listed
in the report, never dropped silently: other tools (their source code is never run, nor imported: nothing in a
shared file decides what code runs), tool rules, the model endpoint (an agent file names no endpoint or key this
side sends to), files, sources, groups, MCP servers, native reasoning. Written files use the current schema.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from pagemind.runtime.porting.letta_messages import messages_of
from pagemind.runtime.porting.records import Bundle
from pagemind.runtime.spec.agent import AgentSpec
from pagemind.tools import BUILTIN_TOOLS

# Letta's tool name → the pagemind built-in that does its work (arguments differ where the names differ: the model
# reads the schema it is given). A name pagemind has itself maps to itself.
LETTA_TOOLS = {
    "send_message": "send_message",
    "core_memory_append": "core_memory_append",
    "core_memory_replace": "core_memory_replace",
    "memory_insert": "core_memory_append",
    "memory_replace": "core_memory_replace",
    "memory_rethink": "memory_rethink",
    "archival_memory_insert": "archival_memory_insert",
    "archival_memory_search": "archival_search",
    "conversation_search": "conversation_search",
}
DEFAULT_SYSTEM = "You are a helpful assistant with a long-term memory."
_LABEL = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


class NotAnAgentFile(ValueError):
    """JSON that is no Letta agent file of either schema."""


@dataclass
class LettaAgent:
    """One agent read from a file: the bundle to import and the notes on what did not map."""

    bundle: Bundle
    notes: list[str] = field(default_factory=list)


def decoded(text: str) -> Any:
    """The file's JSON, decoded again while it is a string (some files hold their JSON as a JSON string)."""
    data: Any = json.loads(text)
    for _ in range(4):  # a bound: a string that decodes to itself forever is no agent file
        if not isinstance(data, str):
            break
        data = json.loads(data)
    return data


def is_agent_file(data: Any) -> bool:
    """Whether decoded JSON looks like a Letta agent file of either schema."""
    return isinstance(data, dict) and (
        isinstance(data.get("agents"), list) or ("core_memory" in data and "messages" in data)
    )


def read_agent_file(data: Any) -> list[LettaAgent]:
    """Every agent of a decoded agent file, as bundles (names made unique within the file)."""
    if not is_agent_file(data):
        raise NotAnAgentFile("not a Letta agent file: neither `agents` nor `core_memory` and `messages` at its top")
    if isinstance(data.get("agents"), list):
        blocks = {b.get("id"): b for b in data.get("blocks") or []}
        tools = {t.get("id"): t for t in data.get("tools") or []}
        found = []
        for agent in data["agents"]:
            own_blocks = [blocks[i] for i in agent.get("block_ids") or [] if i in blocks]
            own_tools = [tools[i] for i in agent.get("tool_ids") or [] if i in tools]
            found.append(_Reader(agent, own_blocks + list(agent.get("memory_blocks") or []), own_tools).read())
        file_notes = _file_notes(data)
    else:
        found = [_Reader(data, list(data.get("core_memory") or []), list(data.get("tools") or [])).read()]
        file_notes = []
    taken: set[str] = set()
    for agent in found:
        agent.notes.extend(file_notes)
        name = _unique(agent.bundle.name, taken)
        agent.bundle.agent["name"] = agent.bundle.agent["spec"]["name"] = name
    return found


def _file_notes(data: dict[str, Any]) -> list[str]:
    notes = []
    for key, what in (("groups", "group"), ("files", "file"), ("sources", "source"), ("mcp_servers", "MCP server")):
        items = data.get(key) or []
        if items:
            notes.append(f"{len(items)} {what}(s) in the file not imported (pagemind has no {key} of an agent)")
    return notes


def _unique(name: str, taken: set[str]) -> str:
    base, n = name, 2
    while name in taken:
        suffix = f"-{n}"
        name, n = base[: 64 - len(suffix)] + suffix, n + 1
    taken.add(name)
    return name


def agent_name(raw: Any) -> str:
    """A valid pagemind agent name for a Letta one (other characters become `-`, at most 64)."""
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", str(raw or "")).strip("-.") or "letta-agent"
    name = name if name[0].isalnum() else f"a{name}"
    return name[:64]


def block_label(raw: Any) -> str:
    """A valid pagemind block label for a Letta one (`system/persona` → `system_persona`, `Notes` → `notes`)."""
    label = re.sub(r"[^a-z0-9_]+", "_", str(raw or "").lower()).strip("_") or "block"
    return (label if label[0].isalpha() else f"b_{label}")[:64]


class _Reader:
    """One Letta agent (either schema) into a bundle and notes."""

    def __init__(self, agent: dict[str, Any], blocks: list[dict[str, Any]], tools: list[dict[str, Any]]):
        self.agent, self.blocks, self.tools = agent, blocks, tools
        self.notes: list[str] = []

    def read(self) -> LettaAgent:
        name = agent_name(self.agent.get("name"))
        if name != self.agent.get("name"):
            self.notes.append(f"agent name {self.agent.get('name')!r} is stored as {name!r}")
        blocks = self._blocks()
        tools = self._tools()
        extra = _pagemind_extra(self.agent)
        spec = {
            "name": name,
            "description": str(self.agent.get("description") or "")[:2000],
            "model": self._model(),
            "system": self._system(),
            "blocks": [
                {
                    "label": b["label"],
                    "value": b["value"],
                    "limit": b["char_limit"],
                    "description": b["description"],
                    "read_only": b["read_only"],
                }
                for b in blocks
            ],
            "tools": tools,
        }
        if isinstance(extra.get("max_steps_per_turn"), int) and extra["max_steps_per_turn"] > 0:
            spec["max_steps_per_turn"] = extra["max_steps_per_turn"]
        AgentSpec.model_validate(spec, context={"trust": "client"})  # built from data only: fails here, not later
        bundle = Bundle(
            agent={"name": name, "spec": spec, "summary": str(extra.get("summary") or "")},
            rows={"block": blocks, "message": list(messages_of(self.agent, self.notes))},
        )
        self._rules()
        return LettaAgent(bundle, self.notes)

    def _system(self) -> str:
        system = str(self.agent.get("system") or "").strip()
        if not system:
            self.notes.append("the file has no system prompt: a default one is used")
        return system or DEFAULT_SYSTEM

    def _model(self) -> dict[str, Any]:
        llm = self.agent.get("llm_config") or {}
        window = max(1024, _int(llm.get("context_window") or self.agent.get("context_window_limit"), 8192))
        output = _int(llm.get("max_tokens"), 1024)
        if output >= window:
            output = max(1, window // 4)
            self.notes.append(f"max_tokens {llm.get('max_tokens')} fills the window: max_output_tokens is {output}")
        raw = llm.get("temperature")
        temperature = min(2.0, max(0.0, float(raw))) if isinstance(raw, int | float) else 0.7
        endpoint = llm.get("model_endpoint")
        if endpoint:
            self.notes.append(
                f"model endpoint {endpoint} ({llm.get('model_endpoint_type') or 'unknown type'}) not applied: the "
                "agent calls this pagemind's endpoint (OPENAI_BASE_URL); set model.base_url in its spec to change that"
            )
        return {
            "name": str(llm.get("model") or self.agent.get("model") or "gpt-4o-mini"),
            "context_window": window,
            "max_output_tokens": output,
            "temperature": temperature,
        }

    def _blocks(self) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = []
        taken: set[str] = set()
        for block in self.blocks:
            raw = block.get("label")
            label = block_label(raw)
            base, n = label, 2
            while label in taken:
                label, n = f"{base[:60]}_{n}", n + 1
            taken.add(label)
            if label != raw:
                self.notes.append(f"block {raw!r} is stored as {label!r}")
            value = str(block.get("value") or "")
            limit = _int(block.get("limit"), 0)
            if len(value) > limit or limit <= 0:
                if limit > 0:
                    self.notes.append(f"block {label!r} holds {len(value)} characters, over its limit {limit}: raised")
                limit = max(limit, len(value), 2000 if limit <= 0 else 0)
            rows.append(
                {
                    "label": label,
                    "value": value,
                    "char_limit": limit,
                    "description": str(block.get("description") or ""),
                    "read_only": bool(block.get("read_only")),
                    "version": 0,
                }
            )
        return rows

    def _tools(self) -> list[str]:
        mapped: list[str] = []
        for tool in self.tools:
            name = str(tool.get("name") or "")
            ours = LETTA_TOOLS.get(name) or (name if name in BUILTIN_TOOLS else None)
            if ours is None:
                kind = tool.get("tool_type") or "custom"
                code = " (its source code is not run)" if tool.get("source_code") else ""
                self.notes.append(f"tool {name!r} ({kind}) has no pagemind equivalent: not imported{code}")
                continue
            if ours != name:
                self.notes.append(f"tool {name!r} is pagemind's {ours!r}")
            if ours not in mapped:
                mapped.append(ours)
        return mapped  # none at all is an agent that answers in plain text (Letta's v1 agents do)

    def _rules(self) -> None:
        rules = self.agent.get("tool_rules") or []
        if rules:
            listed = ", ".join(f"{r.get('type')}:{r.get('tool_name')}" for r in rules if isinstance(r, dict))
            self.notes.append(f"{len(rules)} tool rule(s) not applied ({listed})")


def _int(value: Any, default: int) -> int:
    """A whole number from a file that may hold one as text, or something else (then `default`)."""
    try:
        return int(value) if value is not None and not isinstance(value, bool) else default
    except (TypeError, ValueError):
        return default


def _pagemind_extra(agent: dict[str, Any]) -> dict[str, Any]:
    """What a file pagemind wrote keeps for itself in the agent's metadata (Letta ignores it)."""
    metadata = agent.get("metadata") or agent.get("metadata_") or {}
    extra = metadata.get("pagemind") if isinstance(metadata, dict) else None
    return extra if isinstance(extra, dict) else {}
