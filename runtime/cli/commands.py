"""The agent commands of the CLI: `run`, `chat`, `memory AGENT`, `context`, `agents`.

Each command imports what it needs when it runs: `agents` reads SQL only, and nothing here is loaded by
`pagemind --help`. The kernel (and with it the model SDK) comes in through `load_agent`.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import TYPE_CHECKING

from pagemind.runtime.cli.errors import exit_code
from pagemind.runtime.cli.held_store import open_archival
from pagemind.runtime.cli.live_reply import watch
from pagemind.runtime.cli.shared import CliError, error_line, open_store, out, resolve_spec
from pagemind.runtime.cli.trace import start_recording

if TYPE_CHECKING:
    from pagemind.runtime.agent import Agent
    from pagemind.runtime.process.settings import Settings
    from pagemind.runtime.state.store import StateStore


async def load_agent(target: str, settings: Settings, reset_memory: bool = False) -> Agent:
    """Load an agent for a command."""
    from pagemind.runtime.agent import Agent

    store = open_store(settings)
    return await Agent.load(resolve_spec(target, store), store=store, reset_memory=reset_memory)


def send_through(name: str) -> Callable[[str], str]:
    """What to do through a daemon instead of a turn here: send the message to the daemon."""
    return lambda url: (
        f"send through it with `pagemind send {name} TEXT --server {url}` (POST /v1/agents/{name}/messages)"
    )


def run_through(args: argparse.Namespace, name: str) -> Callable[[str], str]:
    """What to do through a daemon instead of `run`/`chat` with these flags here."""
    if getattr(args, "reset_memory", False):
        return lambda url: (
            "stop it to reset the agent's memory here, or delete the agent through it "
            f"(DELETE {url}/v1/agents/{name}) and send again"
        )
    if getattr(args, "trace", None):
        return lambda url: (
            f"it records every turn's trace under the traces folder (`pagemind trace ls {name}`): send without "
            f"--trace (`pagemind send {name} TEXT --server {url}`)"
        )
    return send_through(name)


async def cmd_run(args: argparse.Namespace, settings: Settings) -> int:
    """Send one message and print the reply."""
    agent = await load_agent(args.agent, settings, args.reset_memory)
    _ = agent.model  # fail before storing the message when no endpoint is configured
    await open_archival(agent.archival, settings, args.wait, run_through(args, agent.name))
    live = watch(agent)  # on a terminal, the reply is printed as it is written
    recorder = start_recording(agent, settings, args.trace)
    try:
        reply = await agent.send(args.message, idempotency_key=args.idempotency_key, wait=args.wait)
    except BaseException:
        if live is not None:
            live.abandon()
        raise
    finally:
        recorder.close()  # a turn that failed still leaves what it did in the trace
    if live is None:
        out(reply or "(no reply)")
    else:
        live.finish(reply or "(no reply)")
    # memory.reflection.every_turns: after the reply and the closed trace (a reflection is no part of a turn's
    # trace, which is why `chat` leaves it to the next `run` or daemon job).
    from pagemind.runtime.reflection.run import reflect_if_due

    await reflect_if_due(agent, args.wait)
    return 0


async def cmd_chat(args: argparse.Namespace, settings: Settings) -> int:
    """An interactive conversation until Ctrl-D or /quit. A turn that fails is reported and the next line taken."""
    import asyncio  # not at module level: `pagemind --help` loads this module and needs no event loop

    agent = await load_agent(args.agent, settings, args.reset_memory)
    _ = agent.model
    await open_archival(agent.archival, settings, args.wait, run_through(args, agent.name))
    live = watch(agent, prefix=f"{agent.name}> ")  # on a terminal, each reply is printed as it is written
    recorder = start_recording(agent, settings, args.trace)
    out(f"Chatting with {agent.name}. Ctrl-D or /quit to leave.")
    loop = asyncio.get_running_loop()
    try:
        while True:
            line = await loop.run_in_executor(None, _read_line)
            if isinstance(line, UnicodeDecodeError):
                _report(f"that line is not valid UTF-8 (byte {line.object[line.start]:#04x}); nothing was sent")
            elif line is None or line.strip() in {"/quit", "/exit"}:
                return 0
            elif line.strip():
                try:
                    reply = await agent.send(line, wait=args.wait) or "(no reply)"
                    if live is None:
                        out(f"{agent.name}> {reply}")
                    else:
                        live.finish(reply)
                except Exception as exc:
                    if live is not None:
                        live.abandon()
                    exit_code(exc)  # reports it in one line, as the CLI reports any failure
                    out("(that turn failed; try again, or /quit)")
    finally:
        recorder.close()


def _report(message: str) -> None:
    error_line(message)


def _read_line() -> str | UnicodeDecodeError | None:
    """The next line from stdin (None at its end); a line that is not UTF-8 comes back as its decoding error."""
    import sys

    sys.stdout.write("you> ")
    sys.stdout.flush()
    raw = sys.stdin.buffer.readline()
    if not raw:
        return None
    try:
        return raw.decode("utf-8").rstrip("\r\n")
    except UnicodeDecodeError as exc:
        return exc


async def cmd_memory(args: argparse.Namespace, settings: Settings) -> int:
    """Core blocks with chars/limit, and their edit history."""
    store = open_store(settings)
    spec = resolve_spec(args.agent, store, tools=False)  # core memory needs no tool
    record = store.get_agent(spec.name) or store.ensure_agent(spec)
    blocks, _ = store.load_core(record.id, spec)
    every = store.block_history(record.id, None)  # the counts are every block's, whichever block is listed
    history = [v for v in every if args.history in ("*", v.label)] if args.history else every
    for block in blocks:
        flag = ", read-only" if block.read_only else ""
        flag += (", structured" if block.schema is not None else "") + (", ephemeral" if block.ephemeral else "")
        edits = [v for v in every if v.label == block.label]
        out(f"[{block.label}] {block.chars}/{block.limit} chars{flag}, {len(edits)} edit(s)")
        out("  " + (block.value.replace("\n", "\n  ") if block.value else "(empty)"))
    if args.history:
        out("")
        out("history:" if history else "history: no edits")
        for v in history:
            out(
                f"  {v.created_at:%Y-%m-%d %H:%M:%S} step {v.step_id or '-'} {v.label} {v.operation}: "
                f"{v.old_value!r} -> {v.new_value!r}"
            )
    return 0


async def cmd_context(args: argparse.Namespace, settings: Settings) -> int:
    """The compiled prompt and its tokens per section."""
    from pagemind.runtime.budget import usable_window
    from pagemind.runtime.cli.context_view import context_report, render_bar, render_legend, usage_line, usage_report

    agent = await load_agent(args.agent, settings)
    compiled = agent.compile()
    correction = agent.window.correction
    usage = await agent.store.usage(agent.record.id)
    prices = agent.spec.model.prices
    if args.json:
        report = context_report(compiled, agent.spec, correction)
        report |= {"usage": usage_report(usage, prices), "messages": compiled.messages}
        out(json.dumps(report, indent=2))
        return 0
    for message in compiled.messages:
        out(f"--- {message['role']} ---")
        out(message.get("content") or json.dumps(message.get("tool_calls")))
    out("")
    out(
        f"window: {agent.spec.model.context_window} tokens, usable {usable_window(agent.spec)} after the output reserve"
    )
    out(render_bar(compiled, agent.spec, correction))
    out(render_legend(compiled, agent.spec))
    out(usage_line(usage, prices))
    return 0


async def cmd_agents(args: argparse.Namespace, settings: Settings) -> int:
    """The stored agents (SQL only), `agents rename OLD NEW`, `agents assign NAME --user U`, or `agents purge NAME`."""
    if args.action == "rename":
        return rename_agent(args.names, settings)
    if args.action == "assign":
        return assign_agent(args.names, args.user, settings)
    if args.action == "purge":
        return await purge_agent(args.names, args.user, settings)
    if args.names:
        raise CliError("usage: pagemind agents [rename OLD NEW | assign NAME --user U | purge NAME]")
    agents = open_store(settings).list_agents()
    if not agents:
        out("no agents yet: `pagemind run agents/companion.yaml -m 'hi'` creates one")
    for a in agents:
        out(
            f"{a.name:<24} spec {a.spec_hash}  created {a.created_at:%Y-%m-%d %H:%M}  "
            f"updated {a.updated_at:%Y-%m-%d %H:%M}  owner {a.owner or '-'}"
        )
    return 0


def rename_agent(names: list[str], settings: Settings) -> int:
    """`agents rename OLD NEW`: the stored agent keeps its id, so all its memory follows the new name."""
    from pagemind.runtime.state.store import AgentNameTaken

    if len(names) != 2:
        raise CliError("usage: pagemind agents rename OLD NEW")
    old, new = names
    try:
        open_store(settings).rename_agent(old, new)
    except KeyError:
        raise CliError(f"no agent is called '{old}' (see `pagemind agents`)") from None
    except AgentNameTaken:
        raise CliError(f"an agent called '{new}' already exists; agents are never merged") from None
    out(f"renamed '{old}' to '{new}'; now set `name: {new}` in its YAML")
    return 0


def assign_agent(names: list[str], user: str | None, settings: Settings) -> int:
    """`agents assign NAME --user U`: the stored agent belongs to U (its user keys reach it, no other's do);
    `--user ''`: to nobody (admin keys only). A running daemon sees it at the agent's next request."""
    from pagemind.runtime.state.keys import KeyInputError, KeyStore

    if len(names) != 1 or user is None:
        raise CliError("usage: pagemind agents assign NAME --user U")
    try:
        found = KeyStore(open_store(settings).engine).assign_by_name(names[0], user or None)
    except KeyInputError as exc:
        raise CliError(str(exc)) from None
    if not found:
        raise CliError(f"no agent is called '{names[0]}' (see `pagemind agents`)")
    out(f"'{names[0]}' now belongs to {user}" if user else f"'{names[0]}' now belongs to nobody (admin keys only)")
    return 0


async def purge_agent(names: list[str], user: str | None, settings: Settings) -> int:
    """`agents purge NAME`: erase the stored agent from every store (`runtime.erasure`), after its running turn.
    `agents purge --user U`: erase the end user: their keys revoked, every agent they own purged, their keys
    deleted (run it again to finish one cut short)."""
    if user is not None and not names:
        return await _purge_user(user, settings)
    if len(names) != 1 or user is not None:
        raise CliError("usage: pagemind agents purge NAME | pagemind agents purge --user U")
    store = open_store(settings)
    if store.get_agent(names[0]) is None:
        raise CliError(f"no agent is called '{names[0]}' (see `pagemind agents`); nothing was purged")
    out(f"purged '{names[0]}': {await _purge_one(store, settings, names[0])}")
    return 0


async def _purge_one(store: StateStore, settings: Settings, name: str) -> str:
    """Purge the stored agent `name` with its turns held off; what was erased, in words."""
    from pagemind.runtime.erasure.purge import purge_agents
    from pagemind.runtime.memory.vectors.records import StoreError, StoreLocked
    from pagemind.runtime.state.locks import AgentBusy

    record = store.get_agent(name)
    if record is None:
        return "nothing left (purged meanwhile)"
    try:
        async with store.turn_lock(record.id, _PURGE_WAIT_S, name):
            [report] = purge_agents(store.engine, settings, [(record.id, name)])
    except AgentBusy:
        raise CliError(
            f"agent '{name}' is running a turn; try again when it ends. Nothing was purged.", code=3
        ) from None
    except StoreLocked as exc:
        raise CliError(f"{exc} Nothing was purged.", code=3) from None
    except StoreError as exc:
        raise CliError(f"{exc} Nothing was purged.", code=2) from None
    summary: str = report.summary()
    return summary


async def _purge_user(user: str, settings: Settings) -> int:
    from pagemind.runtime.state.keys import KeyInputError, KeyStore

    store = open_store(settings)
    keys = KeyStore(store.engine)
    try:
        keys.revoke_user(user)  # no request of theirs from now on (a daemon's cache: within `key_cache_s`)
    except KeyInputError as exc:
        raise CliError(str(exc)) from None
    names = sorted(n for n in keys.owned_names(user) if store.get_agent(n) is not None)
    for name in names:
        out(f"purged '{name}': {await _purge_one(store, settings, name)}")
    deleted = keys.delete_user(user)
    out(f"erased user {user}: {len(names)} agent(s) purged, {deleted} key(s) deleted")
    return 0


_PURGE_WAIT_S = 30.0  # for a running turn of the agent to end
