"""The vocabulary and calendar arithmetic every reader of time words shares: English and Chinese count words and
weekdays, and the ends of weeks, months and years. `dating` (dates for relative words on write), `expiry` (when a
memory stops holding) and `query_time` (the period a query names) all read with these."""

from __future__ import annotations

from datetime import date, timedelta

WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
NUMBER_WORDS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "a couple of": 2,
    "a few": 3,
    "few": 3,
    "several": 3,
}


NUMBER_PATTERN = r"(\d+|a couple of|a few|an?|one|two|three|four|five|six|seven|eight|nine|ten|few|several)"


def shift_month(day: date, months: int) -> date:
    """The first day of the month `months` after `day`'s (negative: before)."""
    index = day.year * 12 + day.month - 1 + months
    return date(index // 12, index % 12 + 1, 1)


def next_weekday(day: date, name: str) -> date:
    """The earliest `name`d weekday after `day` (a week ahead on that weekday itself)."""
    ahead = (WEEKDAYS.index(name) - day.weekday()) % 7 or 7
    return day + timedelta(days=ahead)


def week_end(day: date) -> date:
    """The Monday after `day`'s week."""
    return day + timedelta(days=7 - day.weekday())


def month_end(day: date) -> date:
    """The first day of the month after `day`'s."""
    return shift_month(day, 1)


def year_end(day: date) -> date:
    """The first day of the year after `day`'s."""
    return date(day.year + 1, 1, 1)


_ZH_DIGITS = {"零": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9}
ZH_NUMBER_PATTERN = r"(\d+|[零一二两三四五六七八九十]+|几)"


def zh_count(words: str) -> int:
    """A count in digits or Chinese numerals up to 99 ("三", "十二", "二十", "两"); "几" (a few) is 3."""
    if words.isdigit():
        return int(words)
    if words == "几":
        return 3
    tens, _, ones = words.rpartition("十")
    if "十" not in words:
        return _ZH_DIGITS.get(words, 1)
    return (_ZH_DIGITS.get(tens, 1) if tens else 1) * 10 + _ZH_DIGITS.get(ones, 0)


def zh_weekday(char: str) -> int:
    """The weekday (0 = Monday) a Chinese weekday character names (周一 … 周日)."""
    return 6 if char in "日天" else "一二三四五六".index(char)
