"""When a memory stops holding, read from its wording: "tomorrow", "this week", "until Friday", "下周", "三天内".

    expiry_from_wording("Lin is in Tokyo this week", datetime(2026, 12, 2, 9, tzinfo=timezone.utc))
    → Expiry(at=datetime(2026, 12, 7, 0, 0, tzinfo=timezone.utc), phrase="this week")  # the end of Sunday

A period ends where the calendar ends it: a day at the midnight after it, a week at the end of its Sunday (weeks
start on Monday, as `dating` dates them), a month or year at the end of its last day. The calendar is the write
time's own timezone, i.e. the agent's clock (UTC for the system clock: agents have no timezone setting), the same
calendar `dating` uses for the absolute dates it writes beside relative words. A phrase already followed by such a
date ("tomorrow (2026-12-01)", "next week (week of 2026-12-07)") ends with that date's period, so a memory written
again later (a merge, a re-insert) keeps its expiry.

Only time-bound wording counts, and the rules are conservative (a memory wrongly expired drops out of results; one
wrongly kept only ranks as a stale plan would):
- an explicit bound expires the memory: "until / till / through / by Friday", "for the next 3 days", "within a
  week", "for the rest of the month", "到周五", "周五之前", "三天内", "接下来两周";
- a bare period ("today", "tonight", "tomorrow", "this weekend", "next month", "on Friday", "明天", "下周") does
  only in a statement that is not about the past ("Lin started a new job today", "今天去了公园"), not recurring
  ("every Tuesday", "每周"), and not the start of something lasting ("since", "from next week", "moves to Berlin
  next month", "从下周开始", "下个月搬家");
- past and recurring statements never expire, whatever bound they name ("stayed until Friday").
Of several phrases, the latest end wins.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta

from pagemind.runtime.memory.retrieval.time_words import (
    NUMBER_PATTERN,
    NUMBER_WORDS,
    WEEKDAYS,
    ZH_NUMBER_PATTERN,
    month_end,
    next_weekday,
    shift_month,
    week_end,
    year_end,
    zh_count,
    zh_weekday,
)


@dataclass(frozen=True)
class Expiry:
    """When a memory stops holding, and the words that said so."""

    at: datetime
    phrase: str


# -- periods: each resolves to the first day after it ---------------------------------------------------------


def _day_end(day: date) -> date:
    return day + timedelta(days=1)


def _on_or_after(day: date, weekday: int) -> date:
    """The next `weekday` (0 = Monday) from `day` on, `day` itself included ("until Friday" said on a Friday)."""
    return next_weekday(day - timedelta(days=1), WEEKDAYS[weekday])


def _plus(day: date, count: int, unit: str) -> date:
    """`count` days, weeks or months after `day` (a month later keeps the day, clamped to the month's length)."""
    if unit == "month":
        first = shift_month(day, count)
        return first.replace(day=min(day.day, calendar.monthrange(first.year, first.month)[1]))
    return day + timedelta(days=count * (7 if unit == "week" else 1))


_PERIOD_ENDS: dict[str, Callable[[date], date]] = {
    "day": _day_end,
    "week": week_end,
    "month": month_end,
    "year": year_end,
    "tomorrow": lambda d: _day_end(d + timedelta(days=1)),
    "day after": lambda d: _day_end(d + timedelta(days=2)),
    "next week": lambda d: week_end(d + timedelta(weeks=1)),
    "next month": lambda d: month_end(shift_month(d, 1)),
    "next year": lambda d: year_end(date(d.year + 1, 1, 1)),
}

# -- English ------------------------------------------------------------------------------------------------------

_DAYS = "|".join(WEEKDAYS)
_TARGET = (
    rf"(?:the end of )?(?:the |this |next |this coming )?(?:{_DAYS}|today|tonight|tomorrow|weekend|week|month|"
    r"year|\d{4}-\d{2}-\d{2})"
)
_UNIT = r"(days?|weeks?|months?)"


def _en_target(words: str, day: date) -> date:
    """The end of what an explicit bound names: "Friday", "next week", "the end of the month", "2026-12-24"."""
    words = words.lower().removeprefix("the end of ").removeprefix("the ")
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}", words):
        return _day_end(date.fromisoformat(words))
    nearest, _, name = words.rpartition(" ")
    if name in WEEKDAYS:
        found = next_weekday(day, name) if nearest == "next" else _on_or_after(day, WEEKDAYS.index(name))
        return _day_end(found)
    if name in ("today", "tonight"):
        return _day_end(day)
    if name == "tomorrow":
        return _PERIOD_ENDS["tomorrow"](day)
    period = "week" if name == "weekend" else name
    return _PERIOD_ENDS[f"next {period}" if nearest == "next" else period](day)


def _count(words: str | None) -> int:
    if not words:
        return 1
    return int(words) if words.isdigit() else NUMBER_WORDS[words.lower()]


_Rule = tuple[re.Pattern[str], Callable[[re.Match[str], date], date]]
# Explicit bounds: a past or recurring statement is the only thing that cancels them.
_EN_BOUNDS: list[_Rule] = [
    (re.compile(rf"\b(?:until|till|til|through|thru|by)\s+({_TARGET})\b", re.I), lambda m, d: _en_target(m[1], d)),
    (
        re.compile(rf"\b(?:for|over|in|during) the (?:next|coming) (?:{NUMBER_PATTERN} )?{_UNIT}\b", re.I),
        lambda m, d: _day_end(_plus(d, _count(m[1]), m[2].lower().rstrip("s"))),
    ),
    (
        re.compile(rf"\bwithin (?:the next )?(?:{NUMBER_PATTERN} )?{_UNIT}\b", re.I),
        lambda m, d: _day_end(_plus(d, _count(m[1]), m[2].lower().rstrip("s"))),
    ),
    (
        re.compile(r"\bfor the rest of (?:the |this )?(day|today|tonight|week|weekend|month|year)\b", re.I),
        lambda m, d: _en_target(m[1], d),
    ),
]
# Bare periods: only in a present or future statement that starts nothing lasting.
_EN_PERIODS: list[_Rule] = [
    (re.compile(r"\bthe day after tomorrow\b", re.I), lambda m, d: _PERIOD_ENDS["day after"](d)),
    (re.compile(r"\btomorrow\b", re.I), lambda m, d: _PERIOD_ENDS["tomorrow"](d)),
    (re.compile(r"\b(?:today|tonight|this (?:morning|afternoon|evening))\b", re.I), lambda m, d: _day_end(d)),
    (re.compile(rf"\b(?:next|this coming|this|on) ({_DAYS})\b", re.I), lambda m, d: _en_target(m[0], d)),
    (re.compile(r"\b(?:this|next) (?:week(?:end)?|month|year)\b", re.I), lambda m, d: _en_target(m[0], d)),
]
_EN_PAST = re.compile(
    r"\b(?:was|were|had|did|went|came|got|left|met|saw|took|made|gave|told|said|bought|began|became|ran|spent|"
    r"ago|yesterday|used to|last (?:night|week|weekend|month|year|" + _DAYS + r"))\b|"
    r"\b(?:has|have|'ve|'d)\s+(?:just |already |recently )?(?:\w+(?:ed|en)|got|left|met|sent|spent|bought|"
    r"brought|felt|kept|lost|built|lent|quit|put|set|cut|hurt|read|had|done|gone|seen|made|taken)\b|"
    # a verb in -ed, unless it is a participle of state after a form of "be" ("is scheduled", "are booked")
    r"(?<!\bis )(?<!\bam )(?<!\bare )(?<!\bbe )(?<!'s )(?<!'re )(?<!'m )(?<!\bget )(?<!\bfeel )(?<!\bfeels )"
    r"\b(?!(?:\w*eed|hundred|naked|wicked|sacred|scheduled|planned|booked|supposed|expected|excited|"
    r"worried|tired|stressed|bored|interested|scared|exhausted|concerned|occupied|needed)\b)\w{3,}ed\b",
    re.I,
)
_EN_RECURRING = re.compile(
    r"\b(?:every|each|always|usually|often|sometimes|never|normally|generally|daily|weekly|monthly|yearly|annually|"
    r"weekdays|weekends|(?:mon|tues|wednes|thurs|fri|satur|sun)days|(?:once|twice|times) (?:a|per|each) \w+|"
    r"per (?:day|week|month|year))\b",
    re.I,
)
_EN_LASTING = re.compile(
    r"\b(?:since|from|starting|starts?|begins?|beginning|onwards?|as of|anymore|moves?|moving|relocat\w*|joins?|"
    r"joining|marr\w+|graduat\w*|retir\w*|quits?|quitting|born|forever|permanently)\b",
    re.I,
)

# -- Chinese ------------------------------------------------------------------------------------------------------

_ZH_UNIT = r"(天|日|周|个星期|星期|个礼拜|礼拜|个月)"
_ZH_WEEKDAY = r"(?:周|星期|礼拜)([一二三四五六日天])"
_ZH_UNITS = {
    "天": "day",
    "日": "day",
    "周": "week",
    "个星期": "week",
    "星期": "week",
    "个礼拜": "week",
    "礼拜": "week",
    "个月": "month",
}


_ZH_PERIOD_WORDS: list[tuple[str, str]] = [
    (r"今[天日晚早]", "day"),
    (r"明[天日晚早]", "tomorrow"),
    ("后天", "day after"),
    ("明年", "next year"),
    (r"(?:今)?年[底末]?", "year"),
    (r"下个?(?:周末?|星期|礼拜)", "next week"),
    (r"下个?月", "next month"),
    (r"(?:这个?|本)?月[底末]?", "month"),
]


def _zh_target(words: str, day: date) -> date:
    """The end of what a Chinese bound or period names: "周五", "下周五", "明天", "周末", "月底", "下个月"."""
    weekday = re.search(_ZH_WEEKDAY + "$", words)
    if weekday:
        index = zh_weekday(weekday[1])
        if words.startswith("下"):
            return _day_end(day + timedelta(days=7 - day.weekday() + index))
        if words.startswith(("这", "本")):
            return _day_end(max(day, day + timedelta(days=index - day.weekday())))
        return _day_end(_on_or_after(day, index))
    if words == "大后天":
        return _day_end(day + timedelta(days=3))
    for pattern, period in _ZH_PERIOD_WORDS:
        if re.fullmatch(pattern, words):
            return _PERIOD_ENDS[period](day)
    return week_end(day)  # 这周, 本周, 这个星期, 周末, 这个周末 …


_ZH_TARGET = (
    r"((?:下个?|这个?|本)?" + _ZH_WEEKDAY + r"|下个?(?:周末?|星期|礼拜)|这个?(?:周末?|星期|礼拜)|本周末?|"
    r"(?:这个|本)?周末|下个?月|(?:这个|本)?月[底末]|(?:今)?年[底末]|今天|今晚|明天|后天)"
)
_ZH_BOUNDS: list[_Rule] = [
    (re.compile(r"(?:一直到|直到|截止到?|截至|到)" + _ZH_TARGET), lambda m, d: _zh_target(m[1], d)),
    (re.compile(_ZH_TARGET + r"(?:之前|以前|前)"), lambda m, d: _zh_target(m[1], d)),
    (
        re.compile(ZH_NUMBER_PATTERN + _ZH_UNIT + r"(?:之内|以内|内)"),
        lambda m, d: _day_end(_plus(d, zh_count(m[1]), _ZH_UNITS[m[2]])),
    ),
    (
        re.compile(r"(?:接下来|未来)的?" + ZH_NUMBER_PATTERN + _ZH_UNIT),
        lambda m, d: _day_end(_plus(d, zh_count(m[1]), _ZH_UNITS[m[2]])),
    ),
]
_ZH_PERIODS: list[_Rule] = [
    (re.compile(r"大后天|后天|明天|明日|明早|明晚|今天|今日|今晚|今早"), lambda m, d: _zh_target(m[0], d)),
    (
        re.compile(r"(?:下个?|这个?|本)" + _ZH_WEEKDAY + r"|(?<![上每个])" + _ZH_WEEKDAY),
        lambda m, d: _zh_target(m[0], d),
    ),
    (
        re.compile(
            r"下个?(?:周末?|星期|礼拜)|这个?(?:周末?|星期|礼拜)|本周末?|(?<![上每个])周末|下个?月|这个月|本月|月底|今年|明年"
        ),
        lambda m, d: _zh_target(m[0], d),
    ),
]
_ZH_PAST = re.compile(r"已经|曾经|刚才|刚刚|昨天|前天|上周|上个|去年|(?<!为)了(?!解)")
_ZH_FUTURE = re.compile(r"要|会|将|打算|准备|计划")
_ZH_RECURRING = re.compile(r"每|总是|经常|通常|平时|一般|常常|有时|一直都")
_ZH_LASTING = re.compile(r"从|开始|以来|自从|起[，,。；;]|起$|以后|搬|入职|结婚|毕业|退休|辞职|出生|永远")

# -- reading --------------------------------------------------------------------------------------------------------

_DATED = re.compile(r"\s*\((?:(?:week of )?(\d{4}-\d{2}-\d{2})|([A-Z][a-z]+ \d{4})|(\d{4}))\)")


def _dated_end(text: str, position: int) -> date | None:
    """The end of the period `dating` wrote right after a phrase ("(2026-12-01)", "(week of …)", "(May 2026)")."""
    found = _DATED.match(text, position)
    if found is None:
        return None
    try:
        if found[1]:
            day = date.fromisoformat(found[1])
            return week_end(day) if "week of" in found[0] else _day_end(day)
        if found[2]:
            return month_end(datetime.strptime(found[2], "%B %Y").date())
        return year_end(date(int(found[3]), 1, 1))
    except ValueError:
        return None


# Reported speech: "The user said they have an exam next week" reports a plan, so the tense that counts is the
# reported clause's (models write memories this way), not the reporting verb's.
_EN_REPORTED = re.compile(
    r"^.*?\b(?:said|says|mentioned|mentions|told (?:me|us|you|the assistant)|tells (?:me|us|you)|explained|noted|"
    r"shared|reported|stated|added|wrote|asked)\b(?:\s+that\b)?",
    re.I,
)


def _past(text: str) -> bool:
    if _EN_PAST.search(_EN_REPORTED.sub("", text, count=1)):
        return True
    return bool(_ZH_PAST.search(text)) and not _ZH_FUTURE.search(text)


def expiry_from_wording(text: str, written_at: datetime) -> Expiry | None:
    """When a memory written at `written_at` stops holding, from the time-bound words it uses; None when it says
    nothing time-bound (or when what it says is past, recurring, or the start of something lasting)."""
    if _past(text) or _EN_RECURRING.search(text) or _ZH_RECURRING.search(text):
        return None
    rules = _EN_BOUNDS + _ZH_BOUNDS
    if not (_EN_LASTING.search(text) or _ZH_LASTING.search(text)):
        rules = rules + _EN_PERIODS + _ZH_PERIODS
    day = written_at.date()
    taken: list[tuple[int, int, date, str]] = []
    for pattern, resolve in rules:
        for match in pattern.finditer(text):
            if any(start < match.end() and match.start() < end for start, end, _, _ in taken):
                continue
            try:
                end_day = _dated_end(text, match.end()) or resolve(match, day)
            except (ValueError, OverflowError):  # "by 2026-13-45", "for the next 999999 days": no expiry read
                continue
            taken.append((match.start(), match.end(), end_day, match[0]))
    if not taken:
        return None
    _, _, end_day, phrase = max(taken, key=lambda t: t[2])
    end_day = max(end_day, _day_end(day))  # never before the end of the day it was written
    return Expiry(datetime.combine(end_day, time.min, tzinfo=written_at.tzinfo), phrase)
