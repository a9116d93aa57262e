"""`pagemind memory search|archival|forget`: inspect and prune an agent's external memory.

    pagemind memory search AGENT "query" [--in both|archival|recall] [--limit N]
    pagemind memory archival AGENT [--all] [--history ID]
    pagemind memory forget AGENT ID | --query "home address" [--min-similarity 0.7] [--yes]
    pagemind memory mute|unmute AGENT "my ex Mark";  pagemind memory muted AGENT
    pagemind memory review AGENT [--approve ID | --reject ID | --pin ID | --edit ID --text TEXT]

(`pagemind memory AGENT [--history]` still shows core memory.) Listing and history read SQL only, so they work
while another process holds the embedded vector store; search and forget open it, and say so if it is held.
The parser is built at every start, so this module imports the memory services only when a command runs.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING
from urllib.parse import quote

from pagemind.runtime.cli.held_store import open_archival
from pagemind.runtime.cli.shared import CliError, add_wait, clip, open_store, out, resolve_spec, terminal_safe

if TYPE_CHECKING:
    from pagemind.runtime.memory.archival.memory import ArchivalService
    from pagemind.runtime.process.settings import Settings
    from pagemind.runtime.spec.agent import AgentSpec
    from pagemind.runtime.state.store import StateStore

SUBCOMMANDS = ("search", "archival", "forget", "mute", "unmute", "muted", "review")
MIN_PREFIX = 4  # `forget` deletes for real: a one-character prefix is too easy to mistype


def is_memory_subcommand(argv: Sequence[str]) -> bool:
    """Whether the command line is `memory search|archival|forget …` (rather than `memory AGENT`)."""
    return len(argv) >= 2 and argv[0] == "memory" and argv[1] in SUBCOMMANDS


def memory_parser() -> argparse.ArgumentParser:
    """The parser of `pagemind memory search|archival|forget`."""
    parser = argparse.ArgumentParser(prog="pagemind", description="Inspect an agent's external memory.")
    top = parser.add_subparsers(dest="command", required=True)
    memory = top.add_parser("memory").add_subparsers(dest="memory_command", required=True)
    search = memory.add_parser("search", help="search archival and recall memory")
    search.add_argument("agent", help="agent YAML file or stored agent name")
    search.add_argument("query")
    search.add_argument("--in", dest="where", choices=("both", "archival", "recall"), default="both")
    search.add_argument("--limit", type=int, default=10)
    add_wait(search, "the search")
    search.set_defaults(handler=cmd_search)
    archival = memory.add_parser("archival", help="list archival memories with kind, date and importance")
    archival.add_argument("agent")
    archival.add_argument(
        "--all",
        action="store_true",
        help="include superseded, expired and dormant memories (marked), which searches leave out",
    )
    archival.add_argument("--history", metavar="ID", help="one memory's history (id or unique prefix)")
    archival.set_defaults(handler=cmd_archival)
    forget = memory.add_parser(
        "forget", help="delete one archival memory for real, or (--query) what a query matches from every tier"
    )
    forget.add_argument("agent")
    forget.add_argument("id", nargs="?", help=f"memory id or unique prefix (at least {MIN_PREFIX} characters)")
    forget.add_argument(
        "--query",
        help="forget what these words match (keywords, or meaning) everywhere: memories, core lines, "
        "summaries, episodes, messages (tombstoned), traces",
    )
    forget.add_argument("--min-similarity", type=float, default=None, help="meaning's threshold (default 0.70)")
    forget.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    add_wait(forget, "forgetting")
    forget.set_defaults(handler=cmd_forget)
    for verb, text in (("mute", "stop recalling a topic until unmuted"), ("unmute", "allow a muted topic again")):
        muting = memory.add_parser(verb, help=text)
        muting.add_argument("agent")
        muting.add_argument("topic")
        muting.set_defaults(handler=cmd_mute)
    muted = memory.add_parser("muted", help="list an agent's muted topics")
    muted.add_argument("agent")
    muted.set_defaults(handler=cmd_mute)
    review = memory.add_parser("review", help="memories waiting for review (memory.review): list, approve, reject")
    review.add_argument("agent")
    decision = review.add_mutually_exclusive_group()
    decision.add_argument("--approve", metavar="ID", help="remember a pending memory (id or unique prefix)")
    decision.add_argument("--reject", metavar="ID", help="drop a pending memory for good")
    decision.add_argument(
        "--pin",
        metavar="ID",
        help="approve a pending memory pinned, or pin a remembered one: never decayed, "
        "expired or superseded by reflection",
    )
    decision.add_argument("--edit", metavar="ID", help="change a pending memory's text (with --text)")
    review.add_argument("--text", help="the new text (--edit; with --approve or --pin: approve it so)")
    add_wait(review, "approving")
    review.set_defaults(handler=cmd_review)
    return parser


def _open(target: str, settings: Settings) -> tuple[ArchivalService, StateStore, AgentSpec]:
    from pagemind.runtime.memory.wiring import archival_service
    from pagemind.runtime.state.records import utcnow

    store = open_store(settings)
    spec = resolve_spec(target, store)
    return archival_service(spec, store, settings, utcnow), store, spec


def _resolve(archival: ArchivalService, prefix: str, agent_name: str) -> str:
    memory_id = archival.resolve_id(prefix)
    if memory_id is None:
        raise CliError(f"no single archival memory of '{agent_name}' has an id starting with '{prefix}'")
    return memory_id


def _search_through(name: str, query: str) -> Callable[[str], str]:
    """The daemon's routes that search as `memory search` does."""
    q = quote(query)
    return lambda url: (
        f"search through it: GET {url}/v1/agents/{name}/memory/archival/search?q={q} "
        f"and {url}/v1/agents/{name}/memory/recall/search?q={q}"
    )


async def cmd_search(args: argparse.Namespace, settings: Settings) -> int:
    """Print archival and/or recall matches for a query."""
    from pagemind.runtime.memory.vectors.records import StoreError
    from pagemind.runtime.memory.wiring import build_external_memory
    from pagemind.runtime.state.records import utcnow

    if not args.query.strip():
        raise CliError(
            "the search query is empty; give some words to look for, e.g. "
            '`pagemind memory search AGENT "peanut allergy"`'
        )
    if args.limit <= 0:
        raise CliError(f"--limit {args.limit}: give a positive number of results")
    archival, store, spec = _open(args.agent, settings)
    if args.where in ("both", "archival"):
        await open_archival(archival, settings, args.wait, _search_through(spec.name, args.query))
        try:
            hits = await archival.search(args.query, top_k=args.limit, count_hits=False)
        except StoreError as exc:
            raise CliError(str(exc)) from None
        out(f"archival memory ({len(hits)}){_order_note([h.score for h in hits])}:")
        for h in hits:
            out(f"  {h.id[:8]} {h.date:%Y-%m-%d} {h.kind:<10} score {h.score:.3f}  {clip(h.text)}")
    if args.where in ("both", "recall"):
        record = store.ensure_agent(spec)
        _, recall = build_external_memory(spec, record, store, settings, utcnow)
        messages = await recall.search(args.query, limit=args.limit)
        out(f"recall memory ({len(messages)}){_order_note([m.score for m in messages if m.score is not None])}:")
        for m in messages:
            out(f"  #{m.id} {m.time:%Y-%m-%d %H:%M} {m.role:<9} score {m.score:.3f}  {clip(m.text)}")
    return 0


def _order_note(scores: list[float]) -> str:
    """Why hits are listed out of score order, when they are: the ranking moves a hit that says much what a better
    one said below other hits (`memory.advanced` diversity), and the list shows the order the model gets."""
    if all(a >= b for a, b in zip(scores, scores[1:], strict=False)):
        return ""
    return ", in the order the agent gets them: a hit much like a better one is moved down"


async def cmd_archival(args: argparse.Namespace, settings: Settings) -> int:
    """List archival memories, or show one memory's history."""
    archival, _, spec = _open(args.agent, settings)
    if args.history:
        memory_id = _resolve(archival, args.history, spec.name)
        out(f"history of {memory_id}:")
        for v in archival.history(memory_id):
            out(f"  {v.at:%Y-%m-%d %H:%M:%S} {v.operation:<10} {clip(repr(v.text))} {v.detail}")
        return 0
    from pagemind.runtime.memory.lifecycle.decay import hidden_reason

    now, config = archival.clock(), archival.config.expiry
    activity = archival.activity.at(now)
    memories = [(m, hidden_reason(m, now, config, activity)) for m in archival.list(include_superseded=args.all)]
    count, tags = archival.stats()
    hidden = sum(1 for _, why in memories if why and not why.startswith("superseded"))
    out(
        f"{count} live archival memories; tags: {', '.join(tags) or 'none'}"
        + (f" ({hidden} expired or dormant, listed with --all)" if hidden and not args.all else "")
    )
    for m, why in memories:
        if why and not args.all:
            continue
        flag = f"  [{why}]" if why else f"  [expires {m.expires_at:%Y-%m-%d %H:%M}]" if m.expires_at else ""
        out(
            f"{m.id[:8]} {m.created_at:%Y-%m-%d} {m.kind:<10} importance {m.importance:.2f} hits {m.hit_count}"
            f"{' tags ' + ','.join(m.tags) if m.tags else ''}{flag}\n    {clip(m.text)}"
        )
    return 0


async def cmd_forget(args: argparse.Namespace, settings: Settings) -> int:
    """Delete one archival memory from the vector store and SQL, history included."""
    from pagemind.runtime.memory.vectors.records import StoreError

    if args.query is not None or args.id is None:
        return await cmd_forget_query(args, settings)
    if len(args.id) < MIN_PREFIX:
        raise CliError(
            f"'{args.id}' is too short to name a memory: give at least {MIN_PREFIX} characters of its id "
            "(see `pagemind memory archival AGENT`)"
        )
    archival, _, spec = _open(args.agent, settings)
    memory_id = _resolve(archival, args.id, spec.name)
    await open_archival(
        archival,
        settings,
        args.wait,
        lambda url: f"forget through it: DELETE {url}/v1/agents/{spec.name}/memory/archival/{memory_id}",
    )
    if not args.yes and not _confirm(f"forget {memory_id} of '{spec.name}' for good? [y/N] "):
        raise CliError("not confirmed; nothing deleted (add --yes to skip the question)")
    try:
        await archival.forget(memory_id)
    except StoreError as exc:
        raise CliError(str(exc)) from None
    out(f"forgot {memory_id}")
    return 0


def _confirm(question: str) -> bool:
    """Ask on the terminal (or read the answer from stdin); no answer is no."""
    import sys

    sys.stderr.write(terminal_safe(question))
    sys.stderr.flush()
    answer = sys.stdin.readline() if sys.stdin is not None else ""
    return answer.strip().lower() in {"y", "yes"}


async def cmd_forget_query(args: argparse.Namespace, settings: Settings) -> int:
    """Forget what `--query` matches from every tier of the agent and its traces; say what was removed."""
    from pagemind.runtime.agent import Agent
    from pagemind.runtime.forgetting.forget import forget_everywhere
    from pagemind.runtime.memory.topics import FORGET_SIMILARITY
    from pagemind.runtime.memory.vectors.records import StoreError

    if args.id is not None or not (args.query or "").strip():
        raise CliError("give a memory id, or --query with the words to forget (not both)")
    store = open_store(settings)
    spec = resolve_spec(args.agent, store)
    agent = await Agent.load(spec, settings=settings, store=store)
    if agent.archival is not None:
        await open_archival(
            agent.archival,
            settings,
            args.wait,
            lambda url: f"forget through it: POST {url}/v1/agents/{spec.name}/memory/forget",
        )
    if not args.yes and not _confirm(f"forget what '{args.query}' matches, everywhere in '{spec.name}'? [y/N] "):
        raise CliError("not confirmed; nothing deleted (add --yes to skip the question)")
    similarity = FORGET_SIMILARITY if args.min_similarity is None else args.min_similarity
    try:
        report = await forget_everywhere(agent, args.query, settings.home, min_similarity=similarity)
    except (StoreError, ValueError) as exc:
        raise CliError(str(exc)) from None
    out(report.summary())
    return 0


async def cmd_mute(args: argparse.Namespace, settings: Settings) -> int:
    """Mute or unmute a topic of an agent, or list its muted topics."""
    from pagemind.runtime.memory.topics import MutedTopics

    store = open_store(settings)
    spec = resolve_spec(args.agent, store)
    record = store.get_agent(spec.name) or store.ensure_agent(spec)
    mutes = MutedTopics(record.id, store.engine, None)  # (matching needs the embedder; storing does not)
    if args.memory_command == "muted":
        topics = mutes.topics()
        out(f"{len(topics)} muted topics of '{spec.name}'" + (":" if topics else ""))
        for topic in topics:
            out(f"  {topic}")
        return 0
    try:
        changed = mutes.mute(args.topic) if args.memory_command == "mute" else mutes.unmute(args.topic)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    verb = args.memory_command
    out(f"{verb}d '{args.topic}'" if changed else f"'{args.topic}' was {'already' if verb == 'mute' else 'not'} muted")
    return 0


async def cmd_review(args: argparse.Namespace, settings: Settings) -> int:
    """List the memories waiting for review, or decide on one (approve, reject, pin, edit)."""
    from pagemind.runtime.memory.review import ReviewQueue

    archival, store, spec = _open(args.agent, settings)
    queue = ReviewQueue(archival.agent_id, store.engine, archival, spec.memory.review_policy, archival.clock)
    target = args.approve or args.reject or args.pin or args.edit
    if target is None:
        pending = queue.pending()
        out(f"{len(pending)} memories of '{spec.name}' wait for review" + (":" if pending else ""))
        for p in pending:
            out(f"  {p.id[:8]} {p.created_at:%Y-%m-%d} {p.origin:<12} {p.kind:<10} {clip(p.text)}")
        return 0
    item = queue.resolve(target)
    if args.edit:
        if item is None or not args.text:
            raise CliError("--edit needs the id of a pending memory and --text with its new text")
        queue.edit(item.id, args.text)
        out(f"edited {item.id[:8]}")
        return 0
    if args.reject:
        if item is None:
            raise CliError(f"no single pending memory of '{spec.name}' has an id starting with '{target}'")
        queue.reject(item.id)
        out(f"rejected {item.id[:8]}")
        return 0
    await open_archival(archival, settings, args.wait, _review_through(spec.name))
    if item is None and args.pin:  # a memory already remembered
        memory_id = _resolve(archival, target, spec.name)
        if not await archival.pin(memory_id):
            raise CliError(f"memory {memory_id[:8]} is not live; nothing pinned")
        out(f"pinned {memory_id[:8]}")
        return 0
    if item is None:
        raise CliError(f"no single pending memory of '{spec.name}' has an id starting with '{target}'")
    written = await queue.approve(item.id, pin=bool(args.pin), text=args.text)
    out(f"approved {item.id[:8]} as memory {(written or '')[:8]}" + (", pinned" if args.pin else ""))
    return 0


def _review_through(name: str) -> Callable[[str], str]:
    return lambda url: f"review through it: GET {url}/v1/agents/{name}/memory/review"
