"""`pagemind demo`: a week in the life of the companion agent, through the real runtime, with no model and no
network.

The model's responses come from a script shipped with the package (`runtime/data/demo/companion_week.yaml`),
and the output says so on its first line. Everything else is real: a SQLite database in a temporary
PAGEMIND_HOME, the context compiler, the pressure monitor (warning, eviction, recursive summary), archival and
recall memory with the shipped embedding model, the tools and the trace recorder.
"""

from __future__ import annotations

import tempfile
import textwrap
import time
from collections.abc import Callable
from datetime import datetime
from importlib import resources
from pathlib import Path
from typing import Any, assert_never

import yaml
from pydantic import BaseModel, ConfigDict, Field

from pagemind.runtime.agent import Agent
from pagemind.runtime.events import (
    Event,
    FlushAheadEvent,
    FlushEvent,
    HistoryRepairEvent,
    MemoryEditEvent,
    MemoryReadEvent,
    ModelRequestEvent,
    ModelResponseEvent,
    PressureSqueezedEvent,
    PressureWarningEvent,
    ReplyDeltaEvent,
    ReplyResetEvent,
    SalienceEvent,
    StepEndEvent,
    ToolCallEvent,
    ToolResultEvent,
    TurnEvent,
)
from pagemind.runtime.loop import run_turn
from pagemind.runtime.model.client import ModelRequest
from pagemind.runtime.observer import ObserverGroup
from pagemind.runtime.process.home import cache_folder
from pagemind.runtime.process.settings import Settings
from pagemind.runtime.spec.loading import load_spec
from pagemind.runtime.state.engine import make_engine
from pagemind.runtime.state.store import StateStore
from pagemind.runtime.testing.clock import ManualClock
from pagemind.runtime.testing.models import NO_FACTS, FunctionModel, by_purpose, is_pressure_alert
from pagemind.runtime.testing.responses import call, reply_body, tool_calls_body
from pagemind.runtime.trace.reader import read_trace
from pagemind.runtime.trace.recorder import record
from pagemind.runtime.trace.timeline import BarScale, TimelineRenderer

FIRST_LINE = (
    "pagemind demo: the model's responses below are a script written for this demo (no model is called, no network);"
)
SECOND_LINE = (
    "everything else is the real runtime: SQLite state, context compiler, pressure monitor, archival "
    "memory (embedded Qdrant, local embeddings), recall memory, tools, trace recorder."
)


# -- the script ---------------------------------------------------------------------------------------------------


class DemoStep(BaseModel):
    """One scripted model response: tool calls, a send_message, or a plain reply."""

    model_config = ConfigDict(extra="forbid")

    calls: list[dict[str, dict[str, Any]]] = Field(default_factory=list)
    say: str | None = None
    reply: str | None = None

    def body(self, prefix: str) -> dict[str, Any]:
        """The chat-completions body for this step (tool call ids: `prefix-1`, `prefix-2` …)."""
        if self.reply is not None:
            return reply_body(self.reply)
        calls = [(name, args) for entry in self.calls for name, args in entry.items()]
        if self.say is not None:
            calls.append(("send_message", {"message": self.say}))
        return tool_calls_body(*(call(name, args, f"{prefix}-{i}") for i, (name, args) in enumerate(calls, 1)))


class DemoTurn(BaseModel):
    """One user message, when it arrives, and the model's scripted steps."""

    model_config = ConfigDict(extra="forbid")

    at: datetime
    user: str
    note: str = ""
    model: list[DemoStep]


class DemoScript(BaseModel):
    """A whole demo: the agent, the turns, and answers for the runtime's own model calls."""

    model_config = ConfigDict(extra="forbid")

    title: str
    agent: str
    user_name: str = "user"
    on_warning: list[DemoStep] = Field(default_factory=list)
    summaries: list[str] = Field(default_factory=list)
    extractions: list[str] = Field(default_factory=list)
    turns: list[DemoTurn]


def demo_dir() -> Path:
    """Where the shipped demo files are."""
    return Path(str(resources.files("pagemind.runtime.data") / "demo"))


def load_script(path: Path | None = None) -> tuple[DemoScript, Path]:
    """The demo script (validated) and the folder its agent file is relative to."""
    path = path or demo_dir() / "companion_week.yaml"
    return DemoScript.model_validate(yaml.safe_load(path.read_text())), path.parent


# -- the scripted model -----------------------------------------------------------------------------------------


class DemoModelError(RuntimeError):
    """The script ran out of responses: it no longer fits the runtime's behaviour."""


class DemoModel(FunctionModel):
    """Serves the script (a `FunctionModel` of `pagemind.runtime.testing.models`): the current turn's steps in order,
    `on_warning` after a pressure alert, summaries and extractions for the runtime's own calls."""

    def __init__(self, script: DemoScript):
        self.turn: DemoTurn | None = None
        self.turn_index = 0
        self.steps: list[DemoStep] = []
        self.warning_steps = list(script.on_warning)
        summaries, extractions = list(script.summaries), list(script.extractions)
        super().__init__(
            by_purpose(
                self._step,
                summarize=lambda _: reply_body(
                    summaries.pop(0) if summaries else "Earlier conversation with the user."
                ),
                extract=lambda _: reply_body(extractions.pop(0) if extractions else NO_FACTS),
            )
        )

    def start_turn(self, index: int, turn: DemoTurn) -> None:
        """The next turn's steps become current."""
        self.turn_index, self.turn, self.steps = index, turn, list(turn.model)

    def _step(self, request: ModelRequest) -> dict[str, Any]:
        if self.warning_steps and is_pressure_alert(request):
            return self.warning_steps.pop(0).body(f"w{len(self.warning_steps)}")
        if not self.steps:
            raise DemoModelError(
                f"the demo script has no response left for turn {self.turn_index + 1} "
                f"({self.turn.at if self.turn else '?'}): it no longer fits the runtime"
            )
        step = self.steps.pop(0)
        assert self.turn is not None  # steps come from a turn (`start_turn`)
        return step.body(f"t{self.turn_index + 1}s{len(self.turn.model) - len(self.steps)}")


# -- the display ------------------------------------------------------------------------------------------------


class DemoDisplay:
    """An observer printing the timeline as it happens, in conversational form."""

    def __init__(self, out: Callable[[str], None], scale: BarScale, user_name: str, agent_name: str, width: int):
        self.out = out
        self.renderer = TimelineRenderer(scale, width)
        self.user_name, self.agent_name, self.width = user_name, agent_name, width
        self.errors = 0
        self.counts: dict[str, int] = {}

    def _say(self, who: str, text: str) -> None:
        lines = textwrap.wrap(text, self.width - len(who) - 5) or [""]
        self.out(f"  {who} › {lines[0]}")
        for line in lines[1:]:
            self.out(" " * (len(who) + 5) + line)

    def _count(self, what: str) -> None:
        self.counts[what] = self.counts.get(what, 0) + 1

    def on_event(self, event: Event) -> None:
        """Show the user's and the agent's words as a conversation, and the timeline's lines between them."""
        lines = self.renderer.render(event)  # always: the renderer follows the turns and steps
        match event:
            case TurnEvent():
                self._say(self.user_name, event.user_message)
                return
            case ToolCallEvent() if event.name == "send_message":
                return  # shows as the reply
            case ToolResultEvent():
                self.errors += event.is_error
                if event.name == "send_message" and not event.is_error:
                    self._say(self.agent_name, event.content)
                    return
            case MemoryEditEvent():
                self._count("edits")
            case (
                HistoryRepairEvent()
                | PressureWarningEvent()
                | FlushEvent()
                | FlushAheadEvent()
                | PressureSqueezedEvent()
                | SalienceEvent()
            ):
                self._count(event.kind)
            case StepEndEvent():
                return  # the next step or turn speaks for itself
            case MemoryReadEvent():
                return  # what the turn read shows in what it leads to (and in `pagemind trace show`)
            case ModelRequestEvent() | ModelResponseEvent() | ToolCallEvent():
                pass
            case ReplyDeltaEvent() | ReplyResetEvent():
                return  # the reply is shown whole, when send_message answers
            case _:
                assert_never(event)
        for line in lines:
            self.out(line)


# -- running ----------------------------------------------------------------------------------------------------


async def _run_week(
    out: Callable[[str], None], script: DemoScript, folder: Path, home: Path, width: int
) -> tuple[Agent, DemoDisplay, Path]:
    spec = load_spec(folder / script.agent)
    clock = ManualClock(script.turns[0].at)
    model = DemoModel(script)
    settings = Settings(home=home, database_url=f"sqlite:///{home / 'pagemind.db'}")  # nothing from the environment
    agent = await Agent.load(
        spec, model=model, store=StateStore(make_engine(settings.database_url)), settings=settings, clock=clock
    )
    display = DemoDisplay(out, BarScale.from_spec(spec), script.user_name, agent.name, width)
    trace_path = home / "traces" / agent.name / "demo-week.jsonl"
    recorder = record(agent, path=trace_path)
    agent.observer = ObserverGroup([display, recorder])
    for index, turn in enumerate(script.turns):
        clock.now = turn.at
        out("")
        out(f"── {turn.at:%a %d %b %H:%M} " + "─" * max(0, width - 20))
        if turn.note:
            for line in textwrap.wrap(turn.note, width - 4):
                out(f"  ┆ {line}")
        model.start_turn(index, turn)
        await run_turn(agent, turn.user)
    recorder.close()
    return agent, display, trace_path


def _epilogue(out: Callable[[str], None], agent: Agent, display: DemoDisplay, width: int) -> None:
    out("")
    out("── after the week " + "─" * max(0, width - 18))
    out("core memory (pinned in every prompt):")
    for block in agent.memory.blocks:
        out(f"  [{block.label}] {block.chars}/{block.limit} chars")
        for line in textwrap.wrap(block.value, width - 6) or ["(empty)"]:
            out(f"      {line}")
    in_window = len(agent.window.messages)
    out(
        f"recall memory: {agent.window.recall_count} messages stored, {in_window} in the window, "
        f"{agent.window.recall_count - in_window} evicted (still searchable)"
    )
    if agent.archival is not None:
        count, tags = agent.archival.stats()
        out(f"archival memory: {count} memories (tags: {', '.join(tags) or 'none'})")
    if agent.window.summary:
        out("recursive summary of what left the window:")
        for line in textwrap.wrap(agent.window.summary, width - 6):
            out(f"      {line}")
    counts = display.counts
    out(
        f"pressure: {counts.get('pressure_warning', 0)} warning(s), {counts.get('flush', 0)} flush(es); "
        f"{counts.get('edits', 0)} core-memory edit(s); {display.errors} tool error(s)"
    )


async def run_demo(
    out: Callable[[str], None], home: Path | None = None, script: Path | None = None, width: int = 100
) -> int:
    """Run the demo, printing through `out`; returns the exit code."""
    started = time.perf_counter()
    demo, folder = load_script(script)
    out(FIRST_LINE)
    out(SECOND_LINE)
    with tempfile.TemporaryDirectory(prefix="demo-", dir=cache_folder()) as tmp:  # never the shared temp folder
        state = home or Path(tmp)
        out(
            f"{demo.title}: {len(demo.turns)} messages over {(demo.turns[-1].at - demo.turns[0].at).days + 1} "
            f"days · agent '{folder / demo.agent}' · state in {state}"
        )
        agent, display, trace_path = await _run_week(out, demo, folder, state, width)
        _epilogue(out, agent, display, width)
        agent.store.engine.dispose()
        trace = read_trace(trace_path)
        where = (
            f"{trace_path} (see it with `pagemind trace show {trace_path}`)"
            if home
            else "in the temporary folder (keep it with --home DIR)"
        )
        out(f"trace: {len(trace.events)} events over {len(trace.steps)} steps, recorded {where}")
    out(
        f"({time.perf_counter() - started:.1f} s.) Talk to the agent with a real model: `pagemind init` writes the "
        "example agents into ./agents, then OPENAI_API_KEY=sk-... pagemind chat agents/companion.yaml"
    )
    out("(or any OpenAI-compatible server: OPENAI_BASE_URL=http://127.0.0.1:8080/v1 pagemind chat …)")
    return 0
