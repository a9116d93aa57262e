"""Which archival memories default results show: neither superseded, expired nor dormant from disuse.

Disuse is counted in the agent's ACTIVE days (`memory.activity`: UTC dates on which it received a user message),
not calendar days. A memory unused for `expiry.decay_after_days` active days starts to lose ranking weight (score
× (1 − w·f), f rising linearly to 1 at `expiry.hide_after_days`); past `expiry.hide_after_days` active days it leaves
default results (the filter runs in the vector store: the cutoff is the start of the (⌊hide⌋ + 1)-th most recent
active day, so dormant memories do not take places in the top k). An agent in daily use sees the calendar rule; one
used every few weeks forgets on its own timescale; one nobody talks to forgets nothing, and a user back after four
months finds what was there. A memory is never deleted: a search with a date range shows expired and dormant
memories alike, and `pagemind memory archival AGENT --all` lists them, marked. A memory is used when a search
returns it (a hit), when it is written again (a refresh) and, unless `expiry.prefetch_counts` is off, when prefetch
shows it to the model: that refreshes `last_hit_at` (at most once a day per memory, so prefetch writes little) but
leaves the hit count alone, so usefulness still counts only searches the model made (the lift it gives stops
fading, though, while prefetch keeps showing the memory: a memory still shown is still in use).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from pagemind.runtime.memory.lifecycle.activity import Activity
from pagemind.runtime.memory.vectors.records import PINNED, MemoryFilter, MemoryRecord
from pagemind.runtime.spec.memory import ExpiryConfig

SEEN_EVERY = timedelta(days=1)  # a memory prefetch shows is marked used again only once this long has passed


def search_filter(
    now: datetime,
    config: ExpiryConfig,
    activity: Activity,
    *,
    tags: list[str] | None = None,
    start_date: datetime | None = None,
    end_date: datetime | None = None,
) -> MemoryFilter:
    """What a search considers: live memories used within `hide_after_days` active days by default; every
    unsuperseded memory in a date range when one is given (expired and dormant ones included: looking up a period
    is how they are found)."""
    tags = [t.lower() for t in tags] if tags else None
    if start_date is not None or end_date is not None:
        return MemoryFilter(tags=tags, created_from=start_date, created_to=end_date, unsuperseded=True)
    hide = config.hide_after_days
    return MemoryFilter(tags=tags, live_at=now, used_since=activity.used_since(hide) if hide is not None else None)


def staleness(idle_days: int, after_days: float, full_days: float | None, weight: float) -> float:
    """`1 − w·f`: 1 while a memory was used within `after_days` active days, then f rises linearly from 0 to 1 at
    `full_days` (when it leaves default results; `None`: it keeps falling over as many days again, then stays at
    `1 − w`)."""
    span = (full_days if full_days is not None else 2 * after_days) - after_days
    return 1 - weight * min(1.0, max(0.0, idle_days - after_days) / span)


def disuse_weight(record: MemoryRecord, activity: Activity, config: ExpiryConfig) -> float:
    """The record's ranking weight for disuse (1 while recently used, in active days; always 1 when pinned)."""
    if PINNED in record.tags:
        return 1.0
    return staleness(
        activity.idle(record.last_used()), config.decay_after_days, config.hide_after_days, config.decay_weight
    )


def hidden_reason(record: MemoryRecord, now: datetime, config: ExpiryConfig, activity: Activity) -> str | None:
    """Why default results leave the record out ("superseded by …", "expired …", "dormant: unused since …"), or
    None when they show it."""
    if record.superseded_by:
        return f"superseded by {record.superseded_by[:8]}"
    if record.expires_at is not None and record.expires_at <= now:
        return f"expired {record.expires_at:%Y-%m-%d %H:%M}"
    hide = config.hide_after_days
    if hide is not None and PINNED not in record.tags and (idle := activity.idle(record.last_used())) > hide:
        return f"dormant: unused since {record.last_used():%Y-%m-%d} ({idle} active days)"
    return None


def due_for_seen(records: list[MemoryRecord], now: datetime) -> list[str]:
    """Ids of the records prefetch showed whose last use should move to `now` (not used within `SEEN_EVERY`)."""
    return [r.id for r in records if r.last_used() <= now - SEEN_EVERY]
