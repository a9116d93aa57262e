"""The trace commands of the CLI: `trace ls|show|export`, `replay` (and fork), `demo`; recording for run/chat.

    pagemind trace ls AGENT                      recorded turns: when, steps, tokens, stop reason
    pagemind trace show TRACE                    a readable timeline
    pagemind trace export TRACE --redact         a copy with user and memory text replaced by placeholders
    pagemind replay TRACE                        offline; exit 0 identical, 1 with the first divergence
    pagemind replay TRACE --live --from-step N   fork: recorded responses before step N, then the real model
    pagemind demo                                a week in the life of the companion agent, no network

TRACE is a path, or a trace id (or its prefix) under $PAGEMIND_HOME/traces/.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pagemind.runtime.cli.shared import CliError, error_line, notice, out

if TYPE_CHECKING:
    from pagemind.runtime.crypto.cipher import TextCipher
    from pagemind.runtime.process.settings import Settings
    from pagemind.runtime.trace.reader import Trace
    from pagemind.runtime.trace.recorder import TraceRecorder

OPENAI_DEFAULT_URL = "https://api.openai.com/v1"  # where the SDK sends a client with no base URL

# The parsers below are built at every start (`pagemind --help` included), so the trace machinery, the replayer
# and the model client are imported by the commands that use them, not here.


def _command(handler: Any) -> Any:
    @functools.wraps(handler)
    async def run(args: argparse.Namespace, settings: Settings) -> int:
        try:
            code: int = await handler(args, settings)
            return code
        except CliError as exc:
            error_line(str(exc))
            return 2
        except BrokenPipeError:  # `pagemind trace show … | head`: the reader left, nothing is wrong
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 0

    return run


# -- recording for run / chat ---------------------------------------------------------------------------------


def start_recording(agent: Any, settings: Settings, path: str | None = None) -> TraceRecorder:
    """Record a CLI session: into `path` if given, else one trace per turn under $PAGEMIND_HOME/traces/AGENT/."""
    from pagemind.runtime.trace.recorder import record, traces_dir

    if path:
        return record(agent, path=Path(path))
    return record(agent, directory=traces_dir(settings.home, agent.name))


# -- finding traces -------------------------------------------------------------------------------------------


def trace_cipher(settings: Settings) -> TextCipher | None:
    """What opens the traces' sealed lines: the settings' data key (traces are sealed with the key alone, so reading
    one needs no database)."""
    from pagemind.runtime.crypto.cipher import key_cipher
    from pagemind.runtime.crypto.keys import Encryption

    return key_cipher(Encryption.of(settings).key)


def find_trace(target: str, settings: Settings) -> Path:
    """A trace by path, or by id (or unique prefix) under $PAGEMIND_HOME/traces/."""
    from pagemind.runtime.trace.format import TRACE_SUFFIX

    path = Path(target)
    if path.exists():
        return path
    root = settings.home / "traces"
    stem = path.name.removesuffix(TRACE_SUFFIX)
    matches = (
        sorted(
            p
            for p in root.glob(f"*/*{TRACE_SUFFIX}")
            if p.stem.startswith(stem) or p.stem.split("-")[-1].startswith(stem)
        )
        if root.exists()
        else []
    )
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise CliError(f"no trace file or trace id '{target}' (see `pagemind trace ls AGENT`)")
    raise CliError(f"'{target}' matches {len(matches)} traces: " + ", ".join(p.stem for p in matches[:5]))


def load(target: str, settings: Settings) -> Trace:
    """Read a trace, turning format problems into a user-facing error."""
    from pagemind.runtime.trace.reader import TraceFormatError, read_trace

    try:
        return read_trace(find_trace(target, settings), trace_cipher(settings))
    except TraceFormatError as exc:
        raise CliError(f"cannot read trace: {exc}") from None


def _agent_name(target: str) -> str:
    from pagemind.runtime.spec.loading import SpecError, load_spec

    path = Path(target)
    if path.suffix in {".yaml", ".yml"} or path.exists():
        try:
            return load_spec(path).name
        except SpecError:
            return path.stem
    return target


# -- trace ls / show / export ---------------------------------------------------------------------------------


def _summary_row(trace: Trace) -> str:
    from pagemind.runtime.events import ModelResponseEvent, StepEndEvent

    responses = [e for e in trace.events if isinstance(e, ModelResponseEvent)]
    tokens = sum((e.prompt_tokens or 0) + (e.completion_tokens or 0) for e in responses)
    ends = [e.stop_reason for e in trace.events if isinstance(e, StepEndEvent) and e.stop_reason]
    stop = ends[-1] if trace.complete and ends else f"truncated after step {len(trace.steps)}"
    fork = (
        f"  (fork of {Path(trace.header.parent.trace).stem} at step {trace.header.parent.from_step})"
        if trace.header.parent
        else ""
    )
    return (
        f"{trace.path.stem:<26} {trace.header.created_at:%Y-%m-%d %H:%M:%S}  {len(trace.turns):>5} "
        f"{len(trace.steps):>5} {tokens if tokens else '-':>8}  {stop}{fork}"
    )


def _trace_usage(trace: Trace) -> str:
    """The trace's token use over all its model calls (steps, summaries, extraction), priced with the recorded
    spec's `model.prices` when it has them."""
    from pagemind.runtime.cli.context_view import usage_line
    from pagemind.runtime.events import ModelResponseEvent
    from pagemind.runtime.spec.prices import ModelPrices
    from pagemind.runtime.state.records import UsageTotals

    responses = [e for e in trace.events if isinstance(e, ModelResponseEvent)]
    reported = [e.cached_tokens for e in responses if e.cached_tokens is not None]
    totals = UsageTotals(
        steps=len(responses),
        prompt_tokens=sum(e.prompt_tokens or 0 for e in responses),
        completion_tokens=sum(e.completion_tokens or 0 for e in responses),
        cached_tokens=sum(reported),
        steps_reporting_cache=len(reported),
    )
    priced = (trace.header.spec.get("model") or {}).get("prices")
    return usage_line(totals, ModelPrices.model_validate(priced) if priced else None, "model calls")


@_command
async def cmd_trace_ls(args: argparse.Namespace, settings: Settings) -> int:
    from pagemind.runtime.trace.format import TRACE_SUFFIX
    from pagemind.runtime.trace.reader import TraceFormatError, read_trace
    from pagemind.runtime.trace.recorder import traces_dir

    name = _agent_name(args.agent)
    folder = traces_dir(settings.home, name)
    paths = sorted(folder.glob(f"*{TRACE_SUFFIX}")) if folder.exists() else []
    if not paths:
        out(f"no traces for agent '{name}' under {folder}")
        return 0
    out(f"{'TRACE':<26} {'WHEN (UTC)':<20} {'TURNS':>5} {'STEPS':>5} {'TOKENS':>8}  STOP")
    for path in paths:
        try:
            out(_summary_row(read_trace(path, trace_cipher(settings))))
        except TraceFormatError as exc:
            out(f"{path.stem:<26} unreadable: {exc}")
    return 0


@_command
async def cmd_trace_show(args: argparse.Namespace, settings: Settings) -> int:
    from pagemind.runtime.trace.timeline import render_trace

    trace = load(args.trace, settings)
    for line in render_trace(trace.header, trace.events, width=args.width):
        out(line)
    out("")
    out(_trace_usage(trace))
    if trace.header.redacted:
        out("(redacted copy: user and memory text are placeholders)")
    if not trace.complete:
        from pagemind.runtime.trace.replay import trace_end_note

        out(f"truncated: {trace_end_note(trace)}")
    return 0


@_command
async def cmd_trace_export(args: argparse.Namespace, settings: Settings) -> int:
    from pagemind.runtime.trace.format import TRACE_SUFFIX

    trace = load(args.trace, settings)
    target = Path(args.output or f"{trace.path.stem}{'.redacted' if args.redact else '.copy'}{TRACE_SUFFIX}")
    if target.exists():
        raise CliError(f"{target} exists; choose another path with -o")
    if args.redact:
        from pagemind.runtime.trace.redaction import redact_trace

        redactor = redact_trace(trace, target)
        kinds = ", ".join(f"{n} {k}" for k, n in sorted(redactor.counts.items())) or "nothing"
        out(f"wrote {target} (redacted: {kinds} text(s) replaced by placeholders)")
    else:
        target.write_bytes(trace.path.read_bytes())
        out(f"wrote {target}")
    return 0


# -- replay / fork ----------------------------------------------------------------------------------------------


def _live_model(trace: Trace, args: argparse.Namespace, settings: Settings) -> Any:
    """The fork's live model, at the endpoint and with the key the local configuration (or a flag) names.

    A trace is shared text: its header's `base_url` and `api_key_env` are never used (a doctored header would send
    a local secret to a listener of its author's choosing); only the model's name and sizes come from it."""
    from pydantic import ValidationError

    from pagemind.runtime.model.client import NoModelConfigured, OpenAIModelClient
    from pagemind.runtime.process.problems import one_line_problems
    from pagemind.runtime.spec.agent import ModelSpec
    from pagemind.runtime.trace.header import strip_userinfo

    recorded = dict(trace.header.spec.get("model") or {})
    recorded.update(base_url=args.base_url or settings.openai_base_url, api_key_env=args.api_key_env)
    if args.model:
        recorded["name"] = args.model
    try:
        spec = ModelSpec.model_validate(recorded)
        live = OpenAIModelClient.from_spec(spec)
    except ValidationError as exc:
        raise CliError(f"the trace's model settings do not load: {one_line_problems(exc)}") from None
    except NoModelConfigured as exc:
        raise CliError(str(exc)) from None
    endpoint = strip_userinfo(spec.base_url) or f"{OPENAI_DEFAULT_URL} (OpenAI's; set OPENAI_BASE_URL or --base-url)"
    said = f"live model: {spec.name} at {endpoint}, key from ${spec.api_key_env}"
    (notice if args.json else out)(said)  # --json keeps stdout one JSON document
    return live


@_command
async def cmd_replay(args: argparse.Namespace, settings: Settings) -> int:
    from pagemind.runtime.state.records import utcnow
    from pagemind.runtime.trace.recorder import trace_filename, traces_dir
    from pagemind.runtime.trace.replay import ReplayError, format_report, replay, report_dict

    trace = load(args.trace, settings)
    if args.live != (args.from_step is not None):
        raise CliError(
            "--live and --from-step N go together (fork: recorded responses before step N, then the configured model)"
        )
    live, record_to = None, None
    if args.live:
        live = _live_model(trace, args, settings)
        record_to = (
            Path(args.out)
            if args.out
            else traces_dir(settings.home, trace.header.agent)
            / trace_filename(trace.header.agent, utcnow(), uuid.uuid4().hex)
        )
    try:
        report = await replay(
            trace, live=live, from_step=args.from_step, record_to=record_to, trust_tools=args.trust_tools
        )
    except ReplayError as exc:
        raise CliError(str(exc)) from None
    out(json.dumps(report_dict(report), indent=2) if args.json else format_report(report))
    return report.exit_code


# -- demo -------------------------------------------------------------------------------------------------------


@_command
async def cmd_demo(args: argparse.Namespace, settings: Settings) -> int:
    from pagemind.runtime.cli.demo import run_demo

    return await run_demo(
        out,
        home=Path(args.home) if args.home else None,
        script=Path(args.script) if args.script else None,
        width=args.width,
    )


# -- wiring -----------------------------------------------------------------------------------------------------


def add_parsers(sub: Any) -> None:
    """Add `trace`, `replay` and `demo` to the CLI, and `--trace PATH` to run and chat."""
    for name in ("run", "chat"):
        if name in sub.choices:
            sub.choices[name].add_argument(
                "--trace", metavar="PATH", help="write the trace here (default: $PAGEMIND_HOME/traces/AGENT/)"
            )
    trace = sub.add_parser("trace", help="recorded traces: ls, show, export")
    verbs = trace.add_subparsers(dest="trace_command", required=True)
    ls = verbs.add_parser("ls", help="an agent's recorded turns: when, steps, tokens, stop reason")
    ls.add_argument("agent", help="agent YAML file or name")
    ls.set_defaults(handler=cmd_trace_ls)
    show = verbs.add_parser("show", help="a readable timeline of a trace")
    show.add_argument("trace", help="trace file or id")
    show.add_argument("--width", type=int, default=100)
    show.set_defaults(handler=cmd_trace_show)
    export = verbs.add_parser("export", help="copy a trace, optionally redacted for sharing")
    export.add_argument("trace")
    export.add_argument("--redact", action="store_true", help="replace user and memory text by placeholders")
    export.add_argument("-o", "--output", help="where to write (default: ./<trace>.redacted.jsonl)")
    export.set_defaults(handler=cmd_trace_export)
    rep = sub.add_parser("replay", help="re-run a trace offline; exit 0 identical, 1 on the first divergence")
    rep.add_argument("trace")
    rep.add_argument("--live", action="store_true", help="fork: call the configured model from --from-step on")
    rep.add_argument("--from-step", type=int, metavar="N", help="the trace's step where the live model takes over")
    rep.add_argument("--out", help="where a fork's new trace goes (default: $PAGEMIND_HOME/traces/AGENT/)")
    rep.add_argument("--base-url", metavar="URL", help="the live model's endpoint (default: OPENAI_BASE_URL)")
    rep.add_argument(
        "--api-key-env",
        metavar="VAR",
        default="OPENAI_API_KEY",
        help="the environment variable with the live model's key (default OPENAI_API_KEY; never the trace's)",
    )
    rep.add_argument("--model", metavar="NAME", help="the live model's name (default: the one the trace recorded)")
    rep.add_argument("--json", action="store_true", help="the outcome as JSON")
    rep.add_argument(
        "--trust-tools",
        action="store_true",
        help="import and run the custom tools the trace names (default: serve their recorded results; "
        "a trace can name any module, so only for a trace you trust)",
    )
    rep.set_defaults(handler=cmd_replay)
    demo = sub.add_parser("demo", help="watch the virtual-context OS work: a scripted week, no network")
    demo.add_argument("--home", help="keep the demo's state here (default: a temporary folder)")
    demo.add_argument("--script", help=argparse.SUPPRESS)
    demo.add_argument("--width", type=int, default=100)
    demo.set_defaults(handler=cmd_demo)
