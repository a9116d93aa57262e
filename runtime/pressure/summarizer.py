"""The recursive summary: the old summary plus evicted messages in, a new bounded summary out.

When the material does not fit the summarizer's own window it is folded in chunks, each chunk on top of the
summary so far, so no summarizer request ever overflows.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from pagemind.runtime.compiler import clip_text
from pagemind.runtime.messages import Message
from pagemind.runtime.model.client import ModelRequest, ModelResponse
from pagemind.runtime.tokens import count_tokens

SUMMARIZER_INSTRUCTIONS = """\
You maintain the running summary of a long conversation between an AI agent and a user. Messages are leaving \
the agent's context window; fold them into the summary so nothing that matters is lost.
Keep: the user's goals, decisions made, facts about the user and the world (names, numbers, dates, identifiers \
and quoted values copied verbatim), open tasks and promises, and the state of any work in progress. Drop \
small talk and anything already superseded.
Where details were left out, add a short lookup hint naming words to search for with conversation_search \
(e.g. "search: 'passport number'").
Write plain prose or terse bullet points, with absolute dates. Stay under {budget} tokens. Reply with the new \
summary only."""


@dataclass(frozen=True)
class SummaryResult:
    """The new summary and how it was made."""

    text: str
    chunks: int
    truncated: bool


def transcript_line(message: Message) -> str:
    """One message as a transcript line for the summarizer and extractor."""
    when = message.created_at.strftime("%Y-%m-%d %H:%M")
    if message.role == "assistant" and message.tool_calls:
        calls = "; ".join(f"{c.name}({c.arguments})" for c in message.tool_calls)
        text = f"{message.content + ' ' if message.content else ''}[calls {calls}]"
    else:
        text = message.content or ""
    speaker = f"tool {message.name}" if message.role == "tool" else message.role
    return f"[{when}] {speaker}: {text}"


def chunk_lines(lines: Sequence[str], budget: int, encoding: str) -> list[list[str]]:
    """Consecutive lines grouped so each group fits `budget` tokens; an oversize line is clipped to fit alone."""
    chunks: list[list[str]] = [[]]
    used = 0
    for line in lines:
        size = count_tokens(line, encoding) + 1
        if size > budget:
            line, size = clip_text(line, budget - 1, encoding), budget
        if used + size > budget and chunks[-1]:
            chunks.append([])
            used = 0
        chunks[-1].append(line)
        used += size
    return [c for c in chunks if c]


def summary_request(model: str, old_summary: str, lines: Sequence[str], budget: int) -> ModelRequest:
    """The summarizer's request for one chunk."""
    previous = old_summary or "(none yet)"
    user = f"Current summary:\n{previous}\n\nMessages leaving the window:\n" + "\n".join(lines)
    return ModelRequest(
        model=model,
        messages=[
            {"role": "system", "content": SUMMARIZER_INSTRUCTIONS.format(budget=budget)},
            {"role": "user", "content": user},
        ],
        tools=[],
        temperature=0.0,
        max_tokens=budget,
        purpose="summarize",
    )


async def summarize(
    call: Callable[[ModelRequest], Awaitable[ModelResponse]],
    *,
    model: str,
    old_summary: str,
    evicted: Sequence[Message],
    budget: int,
    window: int,
    encoding: str,
) -> SummaryResult:
    """Fold `evicted` into `old_summary` with as many model calls as the summarizer's window needs."""
    overhead = count_tokens(SUMMARIZER_INSTRUCTIONS, encoding) + 64
    room = window - overhead - 2 * budget  # the old summary goes in, a new one of up to `budget` comes out
    if room < 256:
        raise ValueError(f"summarizer window {window} is too small for a {budget}-token summary")
    summary, truncated = old_summary, False
    chunks = chunk_lines([transcript_line(m) for m in evicted], room, encoding)
    for lines in chunks:
        response = await call(summary_request(model, clip_text(summary, budget, encoding), lines, budget))
        text = (response.content or "").strip()
        if not text:
            raise ValueError("the summarizer returned an empty summary")
        bounded = clip_text(text, budget, encoding)
        truncated = truncated or bounded != text
        summary = bounded
    return SummaryResult(summary, len(chunks), truncated)
