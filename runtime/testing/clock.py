"""`ManualClock`: the agent's clock, moved only by the test."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

DEFAULT_START = datetime(2026, 11, 29, 15, 0, tzinfo=UTC)


class ManualClock:
    """The agent's clock (`clock=` wherever the runtime takes one): it reads `now`, which moves only when the test
    sets it or calls `advance`."""

    def __init__(self, start: datetime = DEFAULT_START):
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, delta: timedelta | None = None, **parts: float) -> datetime:
        """Move forward by `delta` and/or `timedelta(**parts)` (`advance(days=1, hours=2)`); returns the new time."""
        self.now += (delta or timedelta()) + timedelta(**parts)
        return self.now
