"""Trace files rewritten without what a forget removed: every string of every event line that holds a removed
text has it replaced by `[forgotten]`, and one that still holds the query's words becomes a tombstone. Rewritten in
place (the file truncated and written again), so an appending recorder keeps appending to the same file. A trace
rewritten so no longer replays exactly; that is the price of forgetting."""

from __future__ import annotations

import json
from pathlib import Path

from pagemind.runtime.forgetting.tiers import scrub_value
from pagemind.runtime.memory.topics import TopicMatcher


def scrub_traces(folder: Path, matcher: TopicMatcher, needles: set[str]) -> int:
    """Rewrite the trace files in `folder` that hold a removed text or the query's words; how many."""
    if not folder.is_dir():
        return 0
    ordered = sorted((n for n in needles if len(n.strip()) > 3), key=len, reverse=True)
    changed = 0
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        raw = path.read_bytes()
        lines = raw.decode("utf-8", errors="replace").splitlines(keepends=True)
        new = [_line(line, matcher, ordered) for line in lines]
        if new != lines:
            with path.open("r+b") as handle:
                data = "".join(new).encode("utf-8")
                handle.write(data)
                handle.truncate(len(data))
            changed += 1
    return changed


def _line(line: str, matcher: TopicMatcher, needles: list[str]) -> str:
    body = line.rstrip("\n")
    try:
        event = json.loads(body)
    except json.JSONDecodeError:
        return line if not any(n in body for n in needles) and not matcher.by_words(body) else "\n"
    cleaned = scrub_value(event, matcher, needles)
    if cleaned == event:
        return line
    return json.dumps(cleaned, ensure_ascii=False, separators=(",", ":")) + ("\n" if line.endswith("\n") else "")
