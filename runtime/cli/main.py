"""The `pagemind` command line: run, chat, memory, context, agents."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Sequence

from pydantic import ValidationError

from pagemind.runtime.agent import Agent
from pagemind.runtime.cli.trace import add_parsers as add_trace_parsers, start_recording
from pagemind.runtime.cli.context_view import context_report, render_bar, render_legend
from pagemind.runtime.budget import usable_window
from pagemind.runtime.model_client import ModelError
from pagemind.runtime.settings import Settings
from pagemind.runtime.spec import AgentSpec, SpecError, load_spec
from pagemind.runtime.state.store import StateStore
from pagemind.runtime.logs import configure_logging


class CliError(Exception):
    """A user-facing error: printed without a traceback, exit code 2 unless given."""

    def __init__(self, message: str, code: int = 2):
        super().__init__(message)
        self.code = code


def out(text: str = "") -> None:
    """What the CLI shows the user (output, not logging)."""
    sys.stdout.write(text + "\n")


def _store(settings: Settings) -> StateStore:
    return StateStore.open(settings.database_url)


def resolve_spec(target: str, store: StateStore) -> AgentSpec:
    """An agent by YAML path, or by name from the database."""
    path = Path(target)
    if path.suffix in {".yaml", ".yml"} or path.exists():
        return load_spec(path)
    stored = store.stored_spec_json(target)
    if stored is None:
        raise CliError(f"no agent file or stored agent called '{target}' (see `pagemind agents`)")
    try:
        return AgentSpec.model_validate_json(stored)
    except ValidationError as exc:
        raise CliError(f"stored agent '{target}' no longer validates; run it from its YAML file instead: {exc}")


async def load_agent(target: str, settings: Settings, reset_memory: bool = False) -> Agent:
    """Load an agent for a command."""
    store = _store(settings)
    return await Agent.load(resolve_spec(target, store), store=store, reset_memory=reset_memory)


async def cmd_run(args: argparse.Namespace, settings: Settings) -> int:
    agent = await load_agent(args.agent, settings, args.reset_memory)
    _ = agent.model  # fail before storing the message when no endpoint is configured
    recorder = start_recording(agent, settings, args.trace)
    try:
        reply = await agent.send(args.message)
    finally:
        recorder.close()  # a turn that failed still leaves what it did in the trace
    out(reply or "(no reply)")
    return 0


async def cmd_chat(args: argparse.Namespace, settings: Settings) -> int:
    agent = await load_agent(args.agent, settings, args.reset_memory)
    _ = agent.model
    recorder = start_recording(agent, settings, args.trace)
    out(f"Chatting with {agent.name}. Ctrl-D or /quit to leave.")
    loop = asyncio.get_running_loop()
    try:
        while True:
            line = await loop.run_in_executor(None, _read_line)
            if line is None or line.strip() in {"/quit", "/exit"}:
                return 0
            if line.strip():
                out(f"{agent.name}> {await agent.send(line) or '(no reply)'}")
    finally:
        recorder.close()


def _read_line() -> str | None:
    try:
        return input("you> ")
    except EOFError:
        return None


async def cmd_memory(args: argparse.Namespace, settings: Settings) -> int:
    agent = await load_agent(args.agent, settings)
    history = agent.store.block_history(agent.record.id, args.history if args.history != "*" else None)
    for block in agent.memory.blocks:
        flag = ", read-only" if block.read_only else ""
        edits = [v for v in history if v.label == block.label]
        out(f"[{block.label}] {block.chars}/{block.limit} chars{flag}, {len(edits)} edit(s)")
        out("  " + (block.value.replace("\n", "\n  ") if block.value else "(empty)"))
    if args.history:
        out("")
        out("history:" if history else "history: no edits")
        for v in history:
            out(f"  {v.created_at:%Y-%m-%d %H:%M:%S} step {v.step_id or '-'} {v.label} {v.operation}: "
                f"{v.old_value!r} -> {v.new_value!r}")
    return 0


async def cmd_context(args: argparse.Namespace, settings: Settings) -> int:
    agent = await load_agent(args.agent, settings)
    compiled = agent.compile()
    correction = agent.window.correction
    if args.json:
        out(json.dumps({**context_report(compiled, agent.spec, correction), "messages": compiled.messages}, indent=2))
        return 0
    for message in compiled.messages:
        out(f"--- {message['role']} ---")
        out(message.get("content") or json.dumps(message.get("tool_calls")))
    out("")
    out(f"window: {agent.spec.model.context_window} tokens, usable {usable_window(agent.spec)} after the output reserve")
    out(render_bar(compiled, agent.spec, correction))
    out(render_legend(compiled, agent.spec))
    return 0


async def cmd_agents(args: argparse.Namespace, settings: Settings) -> int:
    agents = _store(settings).list_agents()
    if not agents:
        out("no agents yet: `pagemind run agents/companion.yaml -m 'hi'` creates one")
    for a in agents:
        out(f"{a.name:<24} spec {a.spec_hash}  created {a.created_at:%Y-%m-%d %H:%M}  updated {a.updated_at:%Y-%m-%d %H:%M}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (exposed for tests and docs)."""
    parser = argparse.ArgumentParser(prog="pagemind", description="A virtual-context OS for LLM agents.")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="send one message and print the reply")
    run.add_argument("agent", help="agent YAML file or stored agent name")
    run.add_argument("-m", "--message", required=True)
    run.add_argument("--reset-memory", action="store_true", help="re-seed core blocks from the YAML")
    chat = sub.add_parser("chat", help="interactive conversation")
    chat.add_argument("agent")
    chat.add_argument("--reset-memory", action="store_true")
    memory = sub.add_parser("memory", help="core blocks with chars/limit and edit history; "
                            "also `memory search|archival|forget AGENT …` for external memory")
    memory.add_argument("agent")
    memory.add_argument("--history", nargs="?", const="*", help="list edits (of one block, or all)")
    context = sub.add_parser("context", help="the compiled prompt and its tokens per section")
    context.add_argument("agent")
    context.add_argument("--json", action="store_true")
    sub.add_parser("agents", help="list stored agents")
    add_trace_parsers(sub)  # trace ls|show|export, replay, demo; --trace on run and chat
    return parser


COMMANDS = {"run": cmd_run, "chat": cmd_chat, "memory": cmd_memory, "context": cmd_context, "agents": cmd_agents}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `pagemind` console script."""
    configure_logging()
    from pagemind.runtime.cli.memory import is_memory_subcommand, memory_parser  # memory search|archival|forget

    argv = list(sys.argv[1:] if argv is None else argv)
    args = (memory_parser() if is_memory_subcommand(argv) else build_parser()).parse_args(argv)
    settings = Settings.from_env()
    try:
        return asyncio.run((getattr(args, "handler", None) or COMMANDS[args.command])(args, settings))
    except SpecError as exc:
        sys.stderr.write(f"error: invalid agent definition\n{exc}\n")
        return 2
    except (CliError, ModelError) as exc:
        sys.stderr.write(f"error: {exc}\n")
        return getattr(exc, "code", 1)
    except FileExistsError as exc:
        sys.stderr.write(f"error: {exc.filename} already exists (traces are never overwritten); choose another path\n")
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    # `python -m pagemind.runtime.cli.main`: run the package module's main, so errors raised by modules that import
    # pagemind.runtime.cli.main (CliError) are the class main() catches, not a second copy of it.
    from pagemind.runtime.cli.main import main as package_main

    sys.exit(package_main())
