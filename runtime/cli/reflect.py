"""`pagemind reflect AGENT`: run one reflection now and print what it changed.

    pagemind reflect AGENT [--end-session] [--wait SECONDS]

With `--end-session` it does what the daemon's idle trigger does first: the session becomes an episode, old
episodes fade and ephemeral blocks go back to their seeds (`runtime.session_end`), then it reflects.

It holds the agent's turn lock, like a turn. Exit 0 when the reflection is done or had nothing to do, 1 when the
model failed or its answer was not a valid plan (nothing changed). Imports only the standard library until a command
runs.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from pagemind.runtime.cli.shared import out

if TYPE_CHECKING:
    from pagemind.runtime.process.settings import Settings

LABELS = (
    ("merged", "merged"),
    ("resolved", "contradictions resolved"),
    ("insights", "insights"),
    ("done", "marked done"),
    ("profile", "profile updated"),
)


def add_parser(sub: Any) -> None:
    """Add `reflect` to the CLI's subparsers."""
    reflect = sub.add_parser(
        "reflect", help="consolidate the agent's memories now (merge, resolve, insights, profile, done todos)"
    )
    reflect.add_argument("agent", help="agent YAML file or stored agent name")
    reflect.add_argument(
        "--wait",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="how long to wait while a turn of the agent runs elsewhere (default 30)",
    )
    reflect.add_argument(
        "--end-session",
        action="store_true",
        help="end the session first, as the daemon's idle trigger does (episodes, ephemeral blocks)",
    )
    reflect.set_defaults(handler=cmd_reflect)


def summary(result: dict[str, Any]) -> str:
    """One line for a reflection's result."""
    status = result.get("status", "?")
    if status != "done":
        why = result.get("reason") or result.get("error") or ""
        return f"reflection {status}{': ' + why if why else ''}"
    counts = result.get("changes") or {}
    parts = [f"{counts[key]} {label}" if key != "profile" else label for key, label in LABELS if counts.get(key)]
    resumed = " (resumed after an interruption)" if result.get("resumed") else ""
    return f"reflection {result.get('reflection_id', '')[:8]}{resumed}: {', '.join(parts) or 'no changes'}"


def _through_daemon(url: str) -> str:
    return (
        f"it reflects on its own as the agent's `idle:` and `schedule:` say; stop it (the daemon at {url}) "
        "to reflect here"
    )


async def cmd_reflect(args: argparse.Namespace, settings: Settings) -> int:
    """Run one reflection of the agent and print a summary of its changes."""
    from pagemind.runtime.cli.commands import load_agent
    from pagemind.runtime.cli.held_store import open_archival
    from pagemind.runtime.reflection.run import reflect_now

    agent = await load_agent(args.agent, settings)
    _ = agent.model  # no endpoint configured: say how to configure one before anything runs
    await open_archival(agent.archival, settings, args.wait, _through_daemon)
    if args.end_session:
        result = await _end_session(agent, args.wait)
    else:
        result = await reflect_now(agent, args.wait)
    out(summary(result))
    return 1 if result.get("status") in ("failed", "invalid") else 0


async def _end_session(agent: Any, wait: float) -> dict[str, Any]:
    """End the session under the agent's turn lock, print what its first steps did; the reflection's result."""
    from pagemind.runtime.session_end import close_session

    async with agent.store.turn_lock(agent.record.id, wait, agent.name):
        await agent.refresh()
        steps = await close_session(agent)
    episodes, cleared = steps.get("episodes", {}), steps.get("ephemeral", {})
    made = "failed: " + episodes["error"] if "error" in episodes else f"{episodes.get('episodes', 0)} new"
    out(
        f"session ended: episodes {made}, {episodes.get('faded', 0)} faded; "
        f"ephemeral blocks cleared: {', '.join(cleared.get('cleared', [])) or 'none'}"
    )
    reflection: dict[str, Any] = steps.get("reflection", {})
    return reflection
