"""Absolute dates for relative time words, so a memory read months later still says when things happened.

    absolute_dates("I went hiking yesterday", datetime(2026, 11, 29))
    → "I went hiking yesterday (2026-11-28)"

The relative phrase stays (it is what the user said); its absolute date, computed against the time the memory
was written, follows in parentheses. Phrases already followed by a date in parentheses are left alone, so
normalising twice changes nothing.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import date, datetime, timedelta

from pagemind.runtime.memory.retrieval.time_words import (
    NUMBER_PATTERN,
    NUMBER_WORDS,
    WEEKDAYS,
    next_weekday,
    shift_month,
)


def _iso(day: date) -> str:
    return day.isoformat()


def _week_of(day: date) -> str:
    return f"week of {_iso(day - timedelta(days=day.weekday()))}"


def _month(day: date) -> str:
    return day.strftime("%B %Y")


def last_weekday(day: date, name: str) -> date:
    """The latest `name`d weekday before `day` ("last friday"; a week back on that weekday itself)."""
    back = (day.weekday() - WEEKDAYS.index(name.lower())) % 7 or 7
    return day - timedelta(days=back)


def ago(day: date, count: int, unit: str) -> date:
    """A day in the period `count` units ("day", "week", "month", "year") before `day`'s: the day itself for days
    and weeks, the period's first day for months and years. ValueError or OverflowError past the calendar."""
    if unit == "day":
        return day - timedelta(days=count)
    if unit == "week":
        return day - timedelta(weeks=count)
    if unit == "month":
        return shift_month(day, -count)
    return date(day.year - count, 1, 1)


def count_of(word: str) -> int:
    """The number a phrase's count word says: "3", "three", "a", "a couple of", "several" …"""
    return int(word) if word.isdigit() else NUMBER_WORDS[word.lower()]


_AGO_TEXT: dict[str, Callable[[date], str]] = {
    "day": _iso,
    "week": _week_of,
    "month": _month,
    "year": lambda day: str(day.year),
}
AGO = re.compile(rf"\b{NUMBER_PATTERN} (day|week|month|year)s? ago\b", re.I)  # "3 days ago": count_of(m[1]), unit m[2]
LAST_WEEKDAY = re.compile(r"\b(?:last|this past) (" + "|".join(WEEKDAYS) + r")\b", re.I)  # "last friday": m[1]

_Rule = tuple[re.Pattern[str], Callable[[re.Match[str], date], str]]
RELATIVE_DATE_RULES: list[_Rule] = [
    (AGO, lambda m, d: _AGO_TEXT[m[2].lower()](ago(d, count_of(m[1]), m[2].lower()))),
    (LAST_WEEKDAY, lambda m, d: _iso(last_weekday(d, m[1]))),
    (
        re.compile(r"\b(?:next|this coming) (" + "|".join(WEEKDAYS) + r")\b", re.I),
        lambda m, d: _iso(next_weekday(d, m[1].lower())),
    ),
    (re.compile(r"\bthe day before yesterday\b", re.I), lambda m, d: _iso(d - timedelta(days=2))),
    (re.compile(r"\bthe day after tomorrow\b", re.I), lambda m, d: _iso(d + timedelta(days=2))),
    (re.compile(r"\b(?:yesterday|last night)\b", re.I), lambda m, d: _iso(d - timedelta(days=1))),
    (re.compile(r"\btomorrow\b", re.I), lambda m, d: _iso(d + timedelta(days=1))),
    (
        re.compile(r"\b(?:today|tonight|this (?:morning|afternoon|evening)|right now|just now)\b", re.I),
        lambda m, d: _iso(d),
    ),
    (re.compile(r"\blast week(?:end)?\b", re.I), lambda m, d: _week_of(d - timedelta(weeks=1))),
    (re.compile(r"\bnext week(?:end)?\b", re.I), lambda m, d: _week_of(d + timedelta(weeks=1))),
    (re.compile(r"\bthis week(?:end)?\b", re.I), lambda m, d: _week_of(d)),
    (re.compile(r"\blast month\b", re.I), lambda m, d: _month(shift_month(d, -1))),
    (re.compile(r"\bnext month\b", re.I), lambda m, d: _month(shift_month(d, 1))),
    (re.compile(r"\bthis month\b", re.I), lambda m, d: _month(d)),
    (re.compile(r"\blast year\b", re.I), lambda m, d: str(d.year - 1)),
    (re.compile(r"\bnext year\b", re.I), lambda m, d: str(d.year + 1)),
    (re.compile(r"\bthis year\b", re.I), lambda m, d: str(d.year)),
    (re.compile(r"\b(?:recently|lately|these days|nowadays|currently)\b", re.I), lambda m, d: f"as of {_iso(d)}"),
]
_ALREADY_DATED = re.compile(r"\s*\(")


def absolute_dates(text: str, written_at: datetime) -> str:
    """`text` with each relative time phrase followed by its absolute date in parentheses (a phrase past the
    calendar, "99999999 days ago", is left as it is)."""
    day = written_at.date()
    taken: list[tuple[int, int, str]] = []
    for pattern, resolve in RELATIVE_DATE_RULES:
        for match in pattern.finditer(text):
            if any(start < match.end() and match.start() < end for start, end, _ in taken):
                continue
            if _ALREADY_DATED.match(text, match.end()):
                continue
            try:
                taken.append((match.start(), match.end(), resolve(match, day)))
            except (ValueError, OverflowError):
                continue
    for _start, end, value in sorted(taken, reverse=True):
        text = f"{text[:end]} ({value}){text[end:]}"
    return text
