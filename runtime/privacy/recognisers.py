"""What counts as personal data in a text: one recogniser per kind, each a pattern and a check, and one pass that
resolves overlaps.

Patterns find candidates; checks keep the real ones: check digits for cards, resident IDs and IBANs
(`privacy.checksums`), digit counts, separators and context for phones, a nearby word for passports, octet ranges
and version context for IPs. Boundaries are ASCII (`(?<![0-9A-Za-z])`), not `\\b`: in "电话13800138000" there is
no word boundary between 话 and 1. Only the standard library is used, so the CLI's scan stays light.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import date

from pagemind.runtime.privacy.checksums import IBAN_LENGTHS, cn_id_ok, iban_ok, luhn_ok

KINDS = ("phone", "email", "card", "cn_id", "passport", "iban", "ip", "address")
# Which of two overlapping matches of equal length wins: the kind with the stronger evidence first.
PRIORITY = {"email": 0, "iban": 1, "cn_id": 2, "card": 3, "passport": 4, "phone": 5, "ip": 6, "address": 7}
_A = r"(?<![0-9A-Za-z])"  # no ASCII letter or digit before
_Z = r"(?![0-9A-Za-z])"  # nor after


@dataclass(frozen=True, order=True)
class Span:
    """One match: `text[start:end]` is personal data of `kind`."""

    start: int
    end: int
    kind: str
    value: str


# -- context -------------------------------------------------------------------------------------------------------

# Words that make the number after them an order, parcel, ticket or product number rather than a phone or a card,
# unless a word for the kind itself comes after them ("order 12345, call me at …").
_NOT_PERSONAL = re.compile(
    r"(?i)order|invoice|tracking|track\b|\bref\b|reference|serial|sku|isbn|booking|confirmation|ticket|parcel"
    r"|package|shipment|waybill|receipt|transaction|case\b|订单|单号|快递|运单|编号|发票|流水|工单|序列号|型号|取件码"
)
_PHONE_WORDS = re.compile(
    r"(?i)phone|\btel\b|call|mobile|cell|whatsapp|text me|reach me|\bfax|contact|my number"
    r"|电话|手机|联系|致电|打给|微信"
)
_CARD_WORDS = re.compile(r"(?i)card|visa|master|amex|卡|pay|charge|信用|银行")


def _context_says_not(text: str, start: int, own: re.Pattern[str], width: int = 32) -> bool:
    """Whether the words just before `start` name an order/ticket/parcel number, with no word for the kind after."""
    before = text[max(0, start - width) : start]
    last_not = max((m.end() for m in _NOT_PERSONAL.finditer(before)), default=-1)
    if last_not < 0:
        return False
    return max((m.end() for m in own.finditer(before)), default=-1) < last_not


def _digits(value: str) -> str:
    return "".join(char for char in value if char.isdigit())


# -- e-mail --------------------------------------------------------------------------------------------------------

_EMAIL = re.compile(
    r"(?<![A-Za-z0-9._%+-])[A-Za-z0-9](?:[A-Za-z0-9._%+-]{0,63})@(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+"
    r"(?!(?:png|jpe?g|gif|svg|webp|pdf|txt|md|js|ts|css|html?|py|json|ya?ml|zip|exe)\b)[A-Za-z]{2,24}(?![A-Za-z0-9-])"
)


def _emails(text: str) -> Iterator[Span]:
    for match in _EMAIL.finditer(text):
        value = match.group()
        if ".." not in value:
            yield Span(match.start(), match.end(), "email", value)


# -- phones --------------------------------------------------------------------------------------------------------

_PHONES = [
    # mainland China mobile, with or without +86 / 0086 / (+86)
    re.compile(_A + r"(?<!\+)(?:(?:\+|00)86[\s-]?|\(\+?86\)\s?)?1[3-9]\d(?:[\s-]?\d{4}){2}" + _Z),
    # mainland China landline: an area code in brackets or followed by a separator, or after +86
    re.compile(
        _A + r"(?:(?:\+|00)86[\s-]?\(?0?(?:10|2\d|[3-9]\d{2})\)?[\s-]?|[(（]0(?:10|2\d|[3-9]\d{2})[)）]\s?"
        r"|0(?:10|2\d|[3-9]\d{2})[\s\-－])[2-9]\d{2,3}[\s-]?\d{4}(?:-\d{1,4})?" + _Z
    ),
    # international (E.164 and its printed forms): + country code, then groups
    re.compile(r"(?<![0-9A-Za-z+])(?:\(\+[1-9]\d{0,2}\)|\+[1-9]\d{0,2})(?:[ .-]?\(?\d{1,5}\)?){1,6}" + _Z),
    # North American: (415) 555-2671, 415-555-2671, 1-800-555-0199
    re.compile(_A + r"(?:1[\s.-])?(?:\([2-9]\d{2}\)\s?|[2-9]\d{2}[\s.-])\d{3}[\s.-]\d{4}" + _Z),
    # national numbers with a trunk 0 (UK, Germany, France, Japan …): 020 7946 0958, 0151 23456789, 06 12 34 56 78
    re.compile(_A + r"(?:\(0\d{1,4}\)|0\d{1,4})(?:[\s.-]?\d{2,4}){2,4}" + _Z),
]
# Bare digits (no separators, no +) are a phone number only right after a word for one: "Phone 9876543210".
_BARE = re.compile(_A + r"\d{10,12}" + _Z)
_IN_LONGER_NUMBER = re.compile(r"\d[ .-]")
_IN_LONGER_NUMBER_AFTER = re.compile(r"[ .-]\d{3}")
_DATE_LIKE = re.compile(r"^\(?\d{1,4}[./-]\d{1,2}[./-]\d{1,4}(?:\D|$)")


def _phones(text: str) -> Iterator[Span]:
    for pattern in _PHONES:
        for match in pattern.finditer(text):
            value = match.group().rstrip()
            head = text[max(0, match.start() - 2) : match.start()]
            if _IN_LONGER_NUMBER.fullmatch(head) or _IN_LONGER_NUMBER_AFTER.match(text, match.end()):
                continue  # the tail or head of a longer grouped number (a card, an IBAN): not a phone of its own
            digits = _digits(value)
            if not 8 <= len(digits) <= 15 or _DATE_LIKE.match(value):
                continue
            if not value.startswith("+") and value.startswith("0") and value.isdigit() and len(value) < 10:
                continue
            if _context_says_not(text, match.start(), _PHONE_WORDS):
                continue
            yield Span(match.start(), match.start() + len(value), "phone", value)
    for match in _BARE.finditer(text):
        before = text[max(0, match.start() - 20) : match.start()]
        if _PHONE_WORDS.search(before) and not _context_says_not(text, match.start(), _PHONE_WORDS):
            yield Span(match.start(), match.end(), "phone", match.group())


# -- payment cards ---------------------------------------------------------------------------------------------------

_CARD_RUN = re.compile(_A + r"\d{1,19}(?:[ -]\d{1,6}){0,6}" + _Z)
# Issuer prefixes (IINs) of the card networks: Visa, Mastercard, Amex, Discover, JCB, Diners, UnionPay, Maestro, Mir.
_CARD_PREFIX = re.compile(r"^(?:4|5[1-5]|2[2-7]|3[47]|6011|64[4-9]|65|35|30[0-5]|36|38|39|62|81|50|5[6-9]|6[0-9]|220)")


_GROUP_BEFORE = re.compile(r"(?:^|(?<=[^0-9A-Z]))[0-9A-Z]*\d[0-9A-Z]*[ -]$")


def _card_ok(groups: list[str]) -> bool:
    digits = "".join(groups)
    if not 13 <= len(digits) <= 19 or not luhn_ok(digits) or not _CARD_PREFIX.match(digits):
        return False
    if len(groups) == 1 or [len(g) for g in groups] in ([4, 6, 5], [4, 6, 4]):
        return True
    return all(len(g) == 4 for g in groups[:-1]) and 1 <= len(groups[-1]) <= 4


def _cards(text: str) -> Iterator[Span]:
    for match in _CARD_RUN.finditer(text):
        parts = re.split(r"([ -])", match.group())
        groups, seps = parts[0::2], parts[1::2]
        found = _best_window(groups, _card_ok)
        if found is None:
            continue
        first, last = found
        start = match.start() + sum(len(g) + 1 for g in groups[:first])
        if _GROUP_BEFORE.search(text, max(0, start - 12), start):
            continue  # the tail of a longer code (an IBAN that failed its check, say): not a card of its own
        value = groups[first] + "".join(
            sep + group for sep, group in zip(seps[first:last], groups[first + 1 : last + 1], strict=True)
        )
        if not _context_says_not(text, start, _CARD_WORDS):
            yield Span(start, start + len(value), "card", value)


def _best_window(groups: list[str], ok: Callable[[list[str]], bool]) -> tuple[int, int] | None:
    """The longest run of consecutive groups (first, last) that `ok` accepts, the earliest among equals."""
    count = len(groups)
    for size in range(count, 0, -1):
        for first in range(count - size + 1):
            if ok(groups[first : first + size]):
                return first, first + size - 1
    return None


# -- mainland China resident ID ------------------------------------------------------------------------------------

_CN_ID = re.compile(_A + r"\d{6}[ ]?\d{8}[ ]?\d{3}[\dXx]" + _Z)


def _cn_ids(text: str) -> Iterator[Span]:
    for match in _CN_ID.finditer(text):
        if cn_id_ok(match.group().replace(" ", "")):
            yield Span(match.start(), match.end(), "cn_id", match.group())


# -- passports -----------------------------------------------------------------------------------------------------

_PASSPORT_WORD = re.compile(
    r"(?i)pass\s?port|护照|護照|reisepass|passeport|pasaporte|passaporto|paspoort|паспорт|旅券|여권"
)
_PASSPORT_NUMBER = re.compile(_A + r"(?=[A-Z0-9]{6,9}" + _Z + r")(?=(?:[A-Z]*\d){5})[A-Z0-9]{6,9}" + _Z)
_PASSPORT_REACH = 40  # characters after the word where its number may stand


def _passports(text: str) -> Iterator[Span]:
    for word in _PASSPORT_WORD.finditer(text):
        window = text[word.end() : word.end() + _PASSPORT_REACH].split("\n")[0]
        match = _PASSPORT_NUMBER.search(window)
        if match is None or _is_date(match.group()):
            continue
        start = word.end() + match.start()
        yield Span(start, start + len(match.group()), "passport", match.group())


def _is_date(value: str) -> bool:
    if len(value) != 8 or not value.isdigit():
        return False
    try:
        date(int(value[:4]), int(value[4:6]), int(value[6:]))
    except ValueError:
        return False
    return True


# -- IBAN ----------------------------------------------------------------------------------------------------------

_IBAN = re.compile(_A + r"[A-Za-z]{2}\d{2}(?:[ -]?[A-Za-z0-9]){8,32}")


def _ibans(text: str) -> Iterator[Span]:
    for match in _IBAN.finditer(text):
        raw = match.group()
        length = IBAN_LENGTHS.get(raw[:2].upper())
        if length is None:
            continue
        taken, end = 0, 0
        for index, char in enumerate(raw):
            if char.isalnum():
                taken += 1
                if taken == length:
                    end = index + 1
                    break
        tail = text[match.start() + end : match.start() + end + 1]
        if end and not tail.isalnum() and iban_ok("".join(c for c in raw[:end] if c.isalnum())):
            yield Span(match.start(), match.start() + end, "iban", raw[:end])


# -- IP addresses --------------------------------------------------------------------------------------------------

_OCTET = r"(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"
_IPV4 = re.compile(r"(?<![0-9A-Za-z.])" + _OCTET + r"(?:\." + _OCTET + r"){3}(?![0-9A-Za-z]|\.\d)")
_IPV6 = re.compile(
    r"(?<![0-9A-Za-z:.])(?:[0-9A-Fa-f]{0,4}:){2,7}(?:\d+(?:\.\d+){3}|[0-9A-Fa-f]{1,4})?(?![0-9A-Za-z:]|\.\d)"
)
_VERSION_WORDS = re.compile(
    r"(?i)(?:\b(?:v|version|ver\.?|release|build|firmware|kernel|python|node|chrome|firefox|android|ios|windows|macos"
    r"|sdk|update|patch|upgrade)|版本|版本号|固件|升级到?)\s*[:：]?\s*$"
)


def _ips(text: str) -> Iterator[Span]:
    for match in _IPV4.finditer(text):
        if not _VERSION_WORDS.search(text[max(0, match.start() - 16) : match.start()]):
            yield Span(match.start(), match.end(), "ip", match.group())
    for match in _IPV6.finditer(text):
        value = match.group()
        if value.count(":") < 2 or len(value.replace(":", "")) < 2:
            continue
        try:
            ipaddress.IPv6Address(value)
        except ValueError:
            continue
        yield Span(match.start(), match.end(), "ip", value)


# -- street addresses ------------------------------------------------------------------------------------------------

_STREET = (
    r"(?:Street|St|Avenue|Ave|Road|Rd|Boulevard|Blvd|Lane|Ln|Drive|Dr|Court|Ct|Place|Pl|Way|Terrace|Square|Sq"
    r"|Parkway|Pkwy|Highway|Hwy|Close|Crescent|Circle|Cir|Trail|Row|Gardens|Walk|Alley|Plaza|Loop|Mews)"
)
_EN_ADDRESS = re.compile(
    _A
    + r"\d{1,5}[A-Za-z]?(?:-\d{1,5})?\s+(?:[A-Z][A-Za-z'.-]*\s+){1,4}"
    + _STREET
    + r"\b(?:\s(?:NW|NE|SW|SE|N|S|E|W)\b)?"
    r"(?:,?\s*(?:Apt|Apartment|Suite|Ste|Unit|Flat|Room|Fl|Floor|#)\.?\s*#?[A-Za-z0-9-]{1,6}\b)?"
    r"(?:,\s*[A-Z][a-z]+(?:\s[A-Z][a-z]+){0,2},?\s+(?:[A-Z]{2}\s+)?\d{5}(?:-\d{4})?\b)?"
)
_DE_ADDRESS = re.compile(r"[A-ZÄÖÜ][a-zäöüß]+(?:straße|strasse|weg|gasse|platz|allee|ring|damm)\s+\d{1,4}[a-z]?" + _Z)
_HAN = r"(?:(?![在住是到的我你他她请把寄送址为从了吗呢吧啊就])[\u4e00-\u9fff])"
# A place name before its level (省, 市, 区, …): never the level's own character, so each level ends at exactly one
# place and the pattern cannot backtrack through every way of splitting "市区县市区县…" (it took seconds).
_PLACE = r"(?:(?![在住是到的我你他她请把寄送址为从了吗呢吧啊就省市区县镇乡])[\u4e00-\u9fff])"
_CN_ADDRESS = re.compile(
    rf"(?:{_PLACE}{{2,8}}(?:省|自治区|市|区|县|镇|乡)){{0,4}}"
    rf"(?:{_HAN}{{1,10}}?(?:路|街|大道|大街|巷|弄|胡同|段)\d{{1,5}}(?:号|號)"
    rf"|{_HAN}{{2,10}}?(?:小区|花园|公寓|大厦|新村|苑)\d{{1,4}}(?:号楼|栋|幢|座|号))"
    rf"(?:{_HAN}{{0,8}}?\d{{1,5}}(?:号楼|栋|幢|座|单元|层|楼|室|房|号))*"
)


def _addresses(text: str) -> Iterator[Span]:
    for pattern in (_EN_ADDRESS, _DE_ADDRESS, _CN_ADDRESS):
        for match in pattern.finditer(text):
            yield Span(match.start(), match.end(), "address", match.group())


RECOGNISERS: dict[str, Callable[[str], Iterator[Span]]] = {
    "phone": _phones,
    "email": _emails,
    "card": _cards,
    "cn_id": _cn_ids,
    "passport": _passports,
    "iban": _ibans,
    "ip": _ips,
    "address": _addresses,
}


def find_spans(text: str, kinds: Iterable[str] = KINDS) -> list[Span]:
    """Every match of the given kinds in `text`, in order, without overlaps: of two overlapping matches the longer
    wins, then the kind earlier in `PRIORITY`, then the earlier one (deterministic whatever the kinds' order)."""
    candidates = [span for kind in set(kinds) for span in RECOGNISERS[kind](text)]
    candidates.sort(key=lambda s: (-(s.end - s.start), PRIORITY[s.kind], s.start))
    chosen: list[Span] = []
    for span in candidates:
        if all(span.end <= other.start or span.start >= other.end for other in chosen):
            chosen.append(span)
    return sorted(chosen)
