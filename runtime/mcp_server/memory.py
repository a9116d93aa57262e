"""One agent's memory as MCP tools, for Claude Code, Cursor or any MCP client: `memory_server(access)` builds the
SDK server that `pagemind mcp AGENT` runs over stdio and the daemon serves at `/mcp/AGENT` (streamable HTTP).

Tools: `archival_search`, `conversation_search`, `archival_insert`, `core_memory_read`, the model's own three
block edits (`core_memory_append`, `core_memory_replace`, `memory_rethink`: versioned edits in the block's history,
with the block's limit and read-only flag as for the model), and `archival_forget` (one memory by id). Each call
reaches the agent through `access`, which holds it as the daemon's memory routes do (its turns held off, its
blocks and window read again if another process changed them), so an edit never races a turn. A forget by query
(the privacy work) registers its tool in `memory_server` beside `archival_forget`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from typing import TYPE_CHECKING, Any

import structlog
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from pagemind.blocks import Block, BlockEditError, CoreMemory
from pagemind.runtime.memory.vectors.records import StoreError
from pagemind.runtime.state.block_edits import StaleBlocks
from pagemind.tools.context import MEMORY_KINDS

if TYPE_CHECKING:
    from pagemind.runtime.agent import Agent

log = structlog.get_logger("pagemind.mcp")

AgentAccess = Callable[[Context], AbstractAsyncContextManager["Agent"]]
"""The agent a call works on, held for the call (the request's context says which, on the daemon)."""

INSTRUCTIONS = (
    "The long-term memory of a pagemind agent: search what it knows (archival_search) and what was said "
    "(conversation_search), store a fact (archival_insert), read and edit its core memory blocks."
)


def dumped(value: Any) -> str:
    """A result as JSON text (what an MCP client shows its model)."""
    return json.dumps(value, ensure_ascii=False, default=str)


def block_view(block: Block) -> dict[str, Any]:
    """One core block as the tools show it."""
    return {
        "label": block.label,
        "value": block.value,
        "chars": block.chars,
        "limit": block.limit,
        "description": block.description,
        "read_only": block.read_only,
    }


def archival_of(agent: Agent) -> Any:
    """The agent's archival memory; a tool error when it has none."""
    if agent.archival is None:
        raise ToolError(f"agent '{agent.name}' has no archival memory (its spec lists no archival tool)")
    return agent.archival


def edit_block(agent: Agent, edit: Callable[[CoreMemory, datetime], Block]) -> str:
    """Apply one block edit to a working copy, store it as a versioned edit (compare-and-set on the block's
    version, as a step's edits), then adopt it; the block's new state as JSON."""
    working = agent.memory.copy()
    try:
        block = edit(working, agent.clock())
        agent.store.commit_edits(agent.record.id, working.clear_pending(), agent.window.block_versions)
    except BlockEditError as exc:
        raise ToolError(str(exc)) from None
    except StaleBlocks as exc:
        raise ToolError(f"{exc}; read the block again and retry") from None
    agent.memory = working
    log.info("mcp_block_edited", agent=agent.name, label=block.label, chars=block.chars)
    return dumped(block_view(block))


def memory_server(access: AgentAccess, name: str = "pagemind") -> MCPServer:
    """The MCP server over the agent `access` gives each call (see the module docstring)."""
    server = MCPServer(name, instructions=INSTRUCTIONS)

    @server.tool()
    async def archival_search(query: str, ctx: Context, limit: int = 10) -> str:
        """Search the agent's archival memory (facts it stored), best first.

        Args:
            query: What to look for, in words.
            limit: How many memories at most (1-50).
        """
        async with access(ctx) as agent:
            try:
                hits = await archival_of(agent).search(query, top_k=max(1, min(limit, 50)), count_hits=False)
            except StoreError as exc:
                raise ToolError(str(exc)) from None
        return dumped([hit.model_dump(mode="json") for hit in hits])

    @server.tool()
    async def conversation_search(ctx: Context, query: str | None = None, limit: int = 10, page: int = 1) -> str:
        """Search everything said with the agent (recall memory), best first; newest first without a query.

        Args:
            query: Words to look for (none: the latest messages).
            limit: How many messages at most (1-50).
            page: Which page of results (1 first).
        """
        async with access(ctx) as agent:
            assert agent.recall is not None  # a loaded agent always has recall memory (`memory.wiring`)
            hits = await agent.recall.search(query, limit=max(1, min(limit, 50)), page=max(1, page))
        return dumped([hit.model_dump(mode="json") for hit in hits])

    @server.tool()
    async def archival_insert(
        content: str, ctx: Context, kind: str = "fact", tags: list[str] | None = None, importance: float | None = None
    ) -> str:
        """Store a memory in the agent's archival memory (a near-duplicate is refreshed, a contradicted one
        superseded).

        Args:
            content: The memory, one self-contained statement.
            kind: One of fact, preference, progress, todo, episode, constraint, reflection.
            tags: Words to file it under.
            importance: 0 to 1 (default: the agent's).
        """
        if kind not in MEMORY_KINDS:
            raise ToolError(f"kind '{kind}' is not one of {', '.join(MEMORY_KINDS)}")
        async with access(ctx) as agent:
            try:
                result = await archival_of(agent).insert(content, kind=kind, tags=tags, importance=importance)
            except (ValueError, StoreError) as exc:  # the write policy's refusal (blank, oversize), a held store
                raise ToolError(str(exc)) from None
        log.info("mcp_archival_inserted", agent=agent.name, action=result.action, id=result.id)
        return str(result.model_dump_json())

    @server.tool()
    async def core_memory_read(ctx: Context) -> str:
        """The agent's core memory blocks (always in its prompt), in order, with their sizes and limits."""
        async with access(ctx) as agent:
            return dumped([block_view(b) for b in agent.memory.blocks])

    @server.tool()
    async def core_memory_append(label: str, content: str, ctx: Context) -> str:
        """Add a line to a core memory block.

        Args:
            label: Block label, e.g. human.
            content: The line to add.
        """
        async with access(ctx) as agent:
            return edit_block(agent, lambda memory, at: memory.append(label, content, at))

    @server.tool()
    async def core_memory_replace(label: str, old_content: str, new_content: str, ctx: Context) -> str:
        """Replace text in a core memory block.

        Args:
            label: Block label.
            old_content: Exact text to replace; must occur once.
            new_content: New text; empty deletes.
        """
        async with access(ctx) as agent:
            return edit_block(agent, lambda memory, at: memory.replace(label, old_content, new_content, at))

    @server.tool()
    async def memory_rethink(label: str, new_value: str, ctx: Context) -> str:
        """Rewrite a core memory block whole.

        Args:
            label: Block label.
            new_value: The block's new text.
        """
        async with access(ctx) as agent:
            return edit_block(agent, lambda memory, at: memory.rethink(label, new_value, at))

    @server.tool()
    async def archival_forget(memory_id: str, ctx: Context) -> str:
        """Delete one archival memory for good (vector store and SQL, its history too).

        Args:
            memory_id: The memory's id as archival_search shows it (or a unique prefix of 8 or more characters).
        """
        async with access(ctx) as agent:
            archival = archival_of(agent)
            full = archival.resolve_id(memory_id) if len(memory_id) >= 8 else None
            if full is None:
                raise ToolError(f"agent '{agent.name}' has no archival memory with id {memory_id!r}")
            try:
                await archival.forget(full)
            except StoreError as exc:
                raise ToolError(str(exc)) from None
        log.info("mcp_archival_forgotten", agent=agent.name, id=full)
        return dumped({"forgotten": full})

    return server
