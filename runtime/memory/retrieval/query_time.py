"""The time a search query names, as date ranges that boost results dated inside them: "last May", "in 2023",
"two weeks ago", "the week before 16 November 2023", "上个月", "去年", "2023年5月".

    parse_query_time("what did Lin do last month?", datetime(2026, 11, 30, tzinfo=timezone.utc))
    → TimeQuery(ranges=(TimeRange(2026-10-01, 2026-11-01, "last month"),), asks_when=False)

Relative words are read against the agent's clock (`now`), on the same calendar `dating` and `expiry` use (weeks
start on Monday; the clock's timezone). A range is half-open, `[start, end)`. "When did …" questions (`asks_when`)
name no range; their answers are usually said with a time word ("yesterday", "last week", a date), so results that
mention one (`mentions_time`) rank a little higher. Event-relative phrases ("before the trip") name no date and are
left alone. Boosting, not filtering: a question's time words are often loose ("in May" for a memory of 1 June).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, timedelta

from pagemind.runtime.memory.retrieval.dating import AGO, LAST_WEEKDAY, ago, count_of, last_weekday
from pagemind.runtime.memory.retrieval.dating import RELATIVE_DATE_RULES as _RELATIVE_WORDS
from pagemind.runtime.memory.retrieval.time_words import (
    WEEKDAYS,
    ZH_NUMBER_PATTERN,
    month_end,
    week_end,
    year_end,
    zh_count,
    zh_weekday,
)


@dataclass(frozen=True)
class TimeRange:
    """A half-open period `[start, end)` of days and the words that named it."""

    start: date
    end: date
    phrase: str

    def contains(self, at: datetime) -> bool:
        """Whether a moment falls inside the period (its calendar day, in its own timezone)."""
        return self.start <= at.date() < self.end


@dataclass(frozen=True)
class TimeQuery:
    """What a query says about time: the periods it names and whether it asks when something happened."""

    ranges: tuple[TimeRange, ...] = ()
    asks_when: bool = False

    def __bool__(self) -> bool:
        return bool(self.ranges) or self.asks_when


_MONTHS = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
]
_MONTH = (
    r"(jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|"
    r"oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
)
_YEAR = r"((?:19|20)\d\d)"


def _month_no(word: str) -> int:
    return next(n for n, name in enumerate(_MONTHS, start=1) if name.startswith(word.lower()[:3]))


def _day(start: date, phrase: str) -> TimeRange:
    return TimeRange(start, start + timedelta(days=1), phrase)


def _week(day: date, phrase: str) -> TimeRange:
    return TimeRange(day - timedelta(days=day.weekday()), week_end(day), phrase)


def _month(year: int, month: int, phrase: str) -> TimeRange:
    first = date(year, month, 1)
    return TimeRange(first, month_end(first), phrase)


def _year(year: int, phrase: str) -> TimeRange:
    return TimeRange(date(year, 1, 1), year_end(date(year, 1, 1)), phrase)


def _recent_month(month: int, today: date, phrase: str, strictly_past: bool) -> TimeRange:
    """The latest `month` at or before today ("in May"); before this month's when `strictly_past` ("last May")."""
    year = today.year if month < today.month or (month == today.month and not strictly_past) else today.year - 1
    return _month(year, month, phrase)


def _ago(count: int, unit: str, today: date, phrase: str) -> TimeRange:
    """The day, week, month or year `count` of them before today's (`dating.ago`)."""
    day = ago(today, count, unit)
    if unit == "day":
        return _day(day, phrase)
    if unit == "week":
        return _week(day, phrase)
    return _month(day.year, day.month, phrase) if unit == "month" else _year(day.year, phrase)


def _relative_to(anchor: TimeRange, word: str, span: str | None, phrase: str) -> TimeRange:
    """ "(the week) before/after <date>": the span next to the anchor, or everything before/after it."""
    days = {"day": 1, "week": 7, "month": 31, "year": 366}.get((span or "").lower(), 0)
    if word.lower() == "before":
        return TimeRange(anchor.start - timedelta(days=days) if days else date.min, anchor.start, phrase)
    return TimeRange(anchor.end, anchor.end + timedelta(days=days) if days else date.max, phrase)


_Rule = tuple[re.Pattern[str], Callable[[re.Match[str], date], TimeRange]]
_DATE_EN = (
    rf"(?:{_MONTH}\.? (\d{{1,2}})(?:st|nd|rd|th)?,? {_YEAR}|(\d{{1,2}})(?:st|nd|rd|th)? (?:of )?{_MONTH}\.?,? "
    rf"{_YEAR}|{_YEAR}-(\d\d)-(\d\d))"
)


def _date_en(m: re.Match[str], offset: int = 0) -> date:
    g = m.groups()[offset : offset + 8]
    if g[0]:
        return date(int(g[2]), _month_no(g[0]), int(g[1]))
    if g[3]:
        return date(int(g[5]), _month_no(g[4]), int(g[3]))
    return date(int(g[6]), int(g[7]), int(m.groups()[offset + 8]))


_EN: list[_Rule] = [
    (
        re.compile(rf"\b(?:(?:the|a) (day|week|month|year) )?(before|after|prior to) {_DATE_EN}\b", re.I),
        lambda m, d: _relative_to(
            _day(_date_en(m, 2), ""), "before" if m[2].lower() != "after" else "after", m[1], m[0]
        ),
    ),
    (re.compile(rf"\b{_DATE_EN}\b", re.I), lambda m, d: _day(_date_en(m), m[0])),
    (re.compile(rf"\b{_MONTH},? {_YEAR}\b", re.I), lambda m, d: _month(int(m[2]), _month_no(m[1]), m[0])),
    (
        re.compile(rf"\b(last|this past|in|during|since|early|late|mid-?) {_MONTH}\b(?!\s*\d)", re.I),
        lambda m, d: _recent_month(_month_no(m[2]), d, m[0], m[1].lower() in ("last", "this past")),
    ),
    (re.compile(rf"\b(?:in|during|of|since) {_YEAR}\b", re.I), lambda m, d: _year(int(m[1]), m[0])),
    (AGO, lambda m, d: _ago(count_of(m[1]), m[2].lower(), d, m[0])),
    (re.compile(r"\bthe day before yesterday\b", re.I), lambda m, d: _day(d - timedelta(days=2), m[0])),
    (re.compile(r"\b(?:yesterday|last night)\b", re.I), lambda m, d: _day(d - timedelta(days=1), m[0])),
    (re.compile(r"\b(?:today|tonight|this (?:morning|afternoon|evening))\b", re.I), lambda m, d: _day(d, m[0])),
    (LAST_WEEKDAY, lambda m, d: _day(last_weekday(d, m[1]), m[0])),
    (
        re.compile(r"\b(last|this|past) week(?:end)?\b", re.I),
        lambda m, d: _week(d - timedelta(weeks=m[1].lower() != "this"), m[0]),
    ),
    (re.compile(r"\b(last|this|past) month\b", re.I), lambda m, d: _ago(int(m[1].lower() != "this"), "month", d, m[0])),
    (re.compile(r"\b(last|this|past) year\b", re.I), lambda m, d: _year(d.year - (m[1].lower() != "this"), m[0])),
]

_ZH: list[_Rule] = [
    (
        re.compile(r"((?:19|20)\d\d)年(\d{1,2})月(\d{1,2})[日号]"),
        lambda m, d: _day(date(int(m[1]), int(m[2]), int(m[3])), m[0]),
    ),
    (re.compile(r"((?:19|20)\d\d)年(\d{1,2})月"), lambda m, d: _month(int(m[1]), int(m[2]), m[0])),
    (re.compile(r"((?:19|20)\d\d)年"), lambda m, d: _year(int(m[1]), m[0])),
    (
        re.compile(r"(?<![年\d])(\d{1,2})月(\d{1,2})[日号]"),
        lambda m, d: _day(_recent_month(int(m[1]), d, "", False).start.replace(day=int(m[2])), m[0]),
    ),
    (
        re.compile(r"(?<![年\d上下])(\d{1,2}|[一二三四五六七八九十]+)月份?"),
        lambda m, d: _recent_month(zh_count(m[1]), d, m[0], False),
    ),
    (
        re.compile(ZH_NUMBER_PATTERN + r"(天|日|周|个星期|个礼拜|个月|年)(?:以前|之前|前)"),
        lambda m, d: _ago(
            zh_count(m[1]), {"天": "day", "日": "day", "个月": "month", "年": "year"}.get(m[2], "week"), d, m[0]
        ),
    ),
    (re.compile(r"大前天"), lambda m, d: _day(d - timedelta(days=3), m[0])),
    (re.compile(r"前天"), lambda m, d: _day(d - timedelta(days=2), m[0])),
    (re.compile(r"昨[天晚日]"), lambda m, d: _day(d - timedelta(days=1), m[0])),
    (re.compile(r"今[天晚早日]"), lambda m, d: _day(d, m[0])),
    (
        re.compile(r"上个?(?:周|星期|礼拜)([一二三四五六日天])"),
        lambda m, d: _day(d - timedelta(days=d.weekday() + 7 - zh_weekday(m[1])), m[0]),
    ),
    (re.compile(r"上个?(?:周末?|星期|礼拜)"), lambda m, d: _week(d - timedelta(weeks=1), m[0])),
    (re.compile(r"(?:这个?|本)(?:周末?|星期|礼拜)"), lambda m, d: _week(d, m[0])),
    (re.compile(r"上个?月"), lambda m, d: _ago(1, "month", d, m[0])),
    (re.compile(r"(?:这个|本)月"), lambda m, d: _ago(0, "month", d, m[0])),
    (re.compile(r"前年"), lambda m, d: _year(d.year - 2, m[0])),
    (re.compile(r"去年"), lambda m, d: _year(d.year - 1, m[0])),
    (re.compile(r"今年"), lambda m, d: _year(d.year, m[0])),
]

_ASKS_WHEN = re.compile(
    r"\bwhen\b|\bwhat (?:date|day|time|year|month|week)\b|\bwhich (?:date|day|year|month|week)\b|\bhow long ago\b|"
    r"什么时候|啥时候|哪天|哪一天|几号|哪年|哪一年|哪个月|几月|何时|多久以前",
    re.I,
)


def parse_query_time(query: str, now: datetime) -> TimeQuery:
    """The periods a query names (relative ones against `now`) and whether it asks when something happened.
    Overlapping phrases count once (the first rule's reading: "the week before 16 November 2023" is one range)."""
    today = now.date()
    taken: list[tuple[int, int, TimeRange]] = []
    for pattern, resolve in _EN + _ZH:
        for match in pattern.finditer(query):
            if any(start < match.end() and match.start() < end for start, end, _ in taken):
                continue
            try:
                found = resolve(match, today)
            except (ValueError, OverflowError, StopIteration):  # "31 February", "9999 years ago": no range read
                continue
            taken.append((match.start(), match.end(), found))
    ranges = tuple(r for _, _, r in sorted(taken, key=lambda t: t[0]))
    return TimeQuery(ranges, bool(_ASKS_WHEN.search(query)))


_SAYS_TIME = re.compile(
    "|".join(
        [
            rf"\b{_MONTH}\b|\b(?:19|20)\d\d\b|"
            rf"\b(?:last|next|this|on) (?:{'|'.join(WEEKDAYS)}|week(?:end)?|month|year)\b",
            r"\b(?:ago|since|anniversary|birthday)\b|[昨前今明后]天|[上下这本]个?(?:周|星期|月)|[去今明前]年|\d+月|\d+号|以前|之前",
            *(f"(?:{pattern.pattern})" for pattern, _ in _RELATIVE_WORDS),
        ]
    ),
    re.I,
)  # one pass over a text, not 20


def mentions_time(text: str) -> bool:
    """Whether a text says when something happened: a relative time word ("yesterday", "last week", "3 days ago",
    "上周"), a month, a year or a date."""
    return _says_time(text) if len(text) <= 2_000 else bool(_SAYS_TIME.search(text))


@functools.lru_cache(maxsize=4096)  # each "when" search asks it of its ~50 best results, often the same ones again
def _says_time(text: str) -> bool:
    return bool(_SAYS_TIME.search(text))  # (texts up to 2,000 characters: the cache holds at most ~8 MB of them)


def time_factor(at: datetime, text: str, query: TimeQuery, range_boost: float, when_boost: float) -> float:
    """A result's score multiplier: `1 + range_boost` when it is dated inside a period the query names, times
    `1 + when_boost` when the query asks "when" and the result mentions a time."""
    factor = 1.0
    if range_boost and any(r.contains(at) for r in query.ranges):
        factor *= 1 + range_boost
    if when_boost and query.asks_when and mentions_time(text):
        factor *= 1 + when_boost
    return factor
