"""What a forget removed, as tools, the CLI and the API show it."""

from __future__ import annotations

from pydantic import BaseModel, Field


class ForgetReport(BaseModel):
    """What one forget removed, per tier (counts only: the report never repeats what was forgotten)."""

    archival: int = Field(0, description="archival memories deleted (rows, history, vector points)")
    episodes: int = Field(0, description="episode memories rewritten without what matched (or deleted)")
    block_lines: dict[str, int] = Field(default_factory=dict, description="lines or fields removed, per core block")
    summaries: int = Field(0, description="summaries rewritten without what matched")
    messages: int = Field(0, description="recall messages replaced by a tombstone")
    trace_files: int = Field(0, description="trace files rewritten without what matched")
    deferred_messages: bool = Field(
        False, description="messages and traces are rewritten when the current turn ends (the tool's path)"
    )

    @property
    def total(self) -> int:
        """Everything removed or rewritten."""
        return (
            self.archival
            + self.episodes
            + sum(self.block_lines.values())
            + self.summaries
            + self.messages
            + self.trace_files
        )

    def summary(self) -> str:
        """One line: what was removed where."""
        lines = sum(self.block_lines.values())
        parts = [
            f"{self.archival} archival memories",
            f"{self.episodes} episodes rewritten",
            f"{lines} core memory lines" + (f" ({', '.join(sorted(self.block_lines))})" if lines else ""),
            f"{self.summaries} summaries rewritten",
            f"{self.messages} messages replaced by a tombstone",
            f"{self.trace_files} trace files rewritten",
        ]
        tail = "; messages and traces are rewritten when this turn ends" if self.deferred_messages else ""
        return "Removed: " + ", ".join(parts) + tail
