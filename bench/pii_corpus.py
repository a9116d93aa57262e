"""A labelled corpus for `bench.pii`: English and Chinese lines made from templates with a seeded generator, each
with the spans of personal data it holds, and hard negatives (order and tracking numbers, dates, prices, numbers
that fail their check digits, 18-digit numbers with a bad ID checksum, version strings shaped like IPs).

`corpus(seed)` gives the same lines for the same seed. Values are made valid where their kind has check digits
(Luhn, ISO 7064 MOD 11-2, mod 97), and made to fail them for the negatives.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from pagemind.runtime.privacy.checksums import luhn_ok

Gold = tuple[int, int, str]


@dataclass(frozen=True)
class Line:
    """One line of the corpus and its labelled spans (start, end, kind); `negative`: made as a hard negative."""

    text: str
    spans: tuple[Gold, ...]
    negative: bool = False
    language: str = "en"


# -- values ----------------------------------------------------------------------------------------------------------


def digits(rng: random.Random, count: int) -> str:
    return "".join(rng.choice("0123456789") for _ in range(count))


def cn_mobile(rng: random.Random) -> str:
    number = rng.choice(["138", "139", "150", "186", "177", "199", "135", "158", "189"]) + digits(rng, 8)
    form = rng.randrange(7)
    spaced = f"{number[:3]} {number[3:7]} {number[7:]}"
    return [
        number,
        spaced,
        f"{number[:3]}-{number[3:7]}-{number[7:]}",
        f"+86 {spaced}",
        f"+86-{number}",
        f"(+86) {number}",
        f"0086 {number}",
    ][form]


def cn_landline(rng: random.Random) -> str:
    area = rng.choice(["010", "021", "020", "0755", "0571", "028"])
    local = str(rng.randint(2, 8)) + digits(rng, 7 if len(area) == 3 else 6)
    return rng.choice(
        [f"{area}-{local}", f"({area}) {local[:4]} {local[4:]}", f"+86 {area[1:]} {local[:4]} {local[4:]}"]
    )


def intl_phone(rng: random.Random) -> str:
    d = lambda n: digits(rng, n)  # noqa: E731  # a short local helper reads better here
    area = str(rng.randint(2, 9)) + d(2)
    exchange = str(rng.randint(2, 9)) + d(2)
    return rng.choice(
        [
            f"+1 ({area}) {exchange}-{d(4)}",
            f"({area}) {exchange}-{d(4)}",
            f"{area}-{exchange}-{d(4)}",
            f"+1{area}{exchange}{d(4)}",
            f"+44 20 {d(4)} {d(4)}",
            f"020 {d(4)} {d(4)}",
            f"07700 {d(6)}",
            f"+49 30 {d(8)}",
            f"0151 {d(8)}",
            f"+33 6 {d(2)} {d(2)} {d(2)} {d(2)}",
            f"06 {d(2)} {d(2)} {d(2)} {d(2)}",
            f"+81 3-{d(4)}-{d(4)}",
            f"090-{d(4)}-{d(4)}",
            f"+61 4{d(2)} {d(3)} {d(3)}",
        ]
    )


def email(rng: random.Random) -> str:
    user = rng.choice(["lin", "zhang.wei", "anna_k", "j.smith", "mike+news", "li-na", "wangfang88", "chen"])
    user = user if rng.random() < 0.8 else digits(rng, 9)  # QQ-style: a number before @qq.com
    domain = rng.choice(["example.com", "163.com", "qq.com", "gmail.com", "mail.example.org", "company.co.uk"])
    return f"{user}@{domain}"


def luhn_complete(prefix: str, length: int, rng: random.Random) -> str:
    body = prefix + digits(rng, length - len(prefix) - 1)
    for check in "0123456789":
        if luhn_ok(body + check):
            return body + check
    raise AssertionError("a Luhn check digit always exists")


def card_number(rng: random.Random, valid: bool = True) -> str:
    prefix, length = rng.choice([("4", 16), ("51", 16), ("55", 16), ("37", 15), ("62", 16), ("6011", 16), ("35", 16)])
    number = luhn_complete(prefix, length, rng)
    if not valid:
        number = number[:-1] + str((int(number[-1]) + rng.randint(1, 9)) % 10)
    if length == 15:
        groups = [number[:4], number[4:10], number[10:]]
    else:
        groups = [number[i : i + 4] for i in range(0, length, 4)]
    return rng.choice([number, " ".join(groups), "-".join(groups)])


_WEIGHTS = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)


def cn_id(rng: random.Random, valid: bool = True) -> str:
    region = rng.choice(["110101", "310104", "440305", "510107", "330106", "320102", "420106"])
    body = f"{region}{rng.randint(1950, 2005)}{rng.randint(1, 12):02d}{rng.randint(1, 28):02d}{digits(rng, 3)}"
    check = "10X98765432"[sum(int(c) * w for c, w in zip(body, _WEIGHTS, strict=True)) % 11]
    if not valid:
        check = rng.choice([c for c in "0123456789" if c != check])
    return body + check


def passport(rng: random.Random) -> str:
    letters = "ABCDEFGHJKLMNPRSTUVWXYZ"
    return rng.choice(
        [
            "E" + digits(rng, 8),
            "G" + digits(rng, 8),
            "EA" + digits(rng, 7),
            digits(rng, 9),
            rng.choice("CFGHJK") + digits(rng, 2) + rng.choice(letters) + digits(rng, 2) + rng.choice(letters) + "47",
            rng.choice(letters) + rng.choice(letters) + digits(rng, 7),
        ]
    )


def _iban_check(country: str, bban: str) -> str:
    moved = bban + country + "00"
    return f"{98 - int(''.join(str(int(c, 36)) for c in moved)) % 97:02d}"


def iban(rng: random.Random, valid: bool = True) -> str:
    country, bban = rng.choice(
        [
            ("DE", lambda: digits(rng, 18)),
            ("GB", lambda: "".join(rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZ") for _ in range(4)) + digits(rng, 14)),
            ("FR", lambda: digits(rng, 23)),
            ("NL", lambda: rng.choice(["ABNA", "INGB", "RABO"]) + digits(rng, 10)),
            ("ES", lambda: digits(rng, 20)),
            ("CH", lambda: digits(rng, 17)),
        ]
    )
    body = bban()
    check = _iban_check(country, body)
    if not valid:
        check = f"{(int(check) + rng.randint(1, 50)) % 97 + 2:02d}"
        if check == _iban_check(country, body):
            check = f"{(int(check) + 1) % 97 + 2:02d}"
    compact = country + check + body
    return compact if rng.random() < 0.4 else " ".join(compact[i : i + 4] for i in range(0, len(compact), 4))


def ip(rng: random.Random) -> str:
    if rng.random() < 0.7:
        return ".".join(str(rng.randint(1, 254)) for _ in range(4))
    return rng.choice(
        [
            f"2001:db8::{rng.randint(1, 0xFFFF):x}",
            f"fe80::{rng.randint(1, 0xFFFF):x}:{rng.randint(1, 0xFFFF):x}:{rng.randint(1, 0xFFFF):x}",
            ":".join(f"{rng.randint(0, 0xFFFF):x}" for _ in range(8)),
        ]
    )


def en_address(rng: random.Random) -> str:
    number = rng.randint(1, 9999)
    street = rng.choice(["Baker Street", "Evergreen Terrace", "Fifth Avenue", "Oak Lane", "Maple Drive", "Sunset Blvd"])
    tail = rng.choice(["", ", Apt 4B", ", Springfield, IL 62704", ", Suite 210"])
    return f"{number} {street}{tail}"


def cn_address(rng: random.Random) -> str:
    city = rng.choice(
        ["北京市朝阳区", "上海市浦东新区", "广州市天河区", "深圳市南山区", "杭州市西湖区", "成都市武侯区"]
    )
    street = rng.choice(["建国路", "世纪大道", "天河路", "科技园南路", "文三路", "人民南路四段"])
    tail = rng.choice(
        ["", f"{rng.randint(1, 12)}栋{rng.randint(101, 2505)}室", f"{rng.randint(1, 9)}号楼{rng.randint(1, 4)}单元"]
    )
    return f"{city}{street}{rng.randint(1, 999)}号{tail}"


# -- hard negatives (never labelled) ---------------------------------------------------------------------------------


def negative_value(slot: str, rng: random.Random) -> str:
    """A value a careless recogniser takes for personal data."""
    d = lambda n: digits(rng, n)  # noqa: E731  # a short local helper reads better here
    match slot:
        case "order":
            return rng.choice([d(10), f"{d(3)}-{d(7)}-{d(7)}", "2024" + d(14), "PO-" + d(8), d(12)])
        case "tracking":
            return rng.choice(["1Z" + d(3) + "AA1" + d(10), "SF" + d(13), "773" + d(12), "YT" + d(16)])
        case "date":
            return rng.choice(
                [
                    f"2024-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
                    f"{rng.randint(1, 28):02d}/{rng.randint(1, 12):02d}/2023",
                    f"{rng.randint(1, 12):02d}.{rng.randint(1, 28):02d}.2025",
                    f"2023年{rng.randint(1, 12)}月{rng.randint(1, 28)}日",
                    f"2024{rng.randint(1, 12):02d}{rng.randint(1, 28):02d}",
                ]
            )
        case "price":
            return rng.choice(
                [f"${rng.randint(1, 9)},{d(3)}.{d(2)}", f"¥{rng.randint(100, 99999)}", f"€ {d(3)},{d(2)}"]
            )
        case "badcard":
            return card_number(rng, valid=False)
        case "badid":
            return cn_id(rng, valid=False)
        case "badiban":
            return iban(rng, valid=False)
        case "version":
            return rng.choice(
                [
                    f"{rng.randint(1, 9)}.{rng.randint(0, 20)}.{rng.randint(0, 9)}",
                    f"{rng.randint(100, 130)}.0.{rng.randint(1000, 6999)}.{rng.randint(10, 200)}",
                    f"10.0.{rng.randint(19000, 22999)}.{rng.randint(100, 3999)}",
                ]
            )
        case "ipversion":
            return ".".join(str(rng.randint(0, 9)) for _ in range(4))
        case "time":
            return f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}"
        case "shortnum":
            return rng.choice([d(6), d(7), "1" + str(rng.randint(0, 2)) + d(9), d(5)])
    raise ValueError(slot)


POSITIVE = {
    "phone": lambda rng: rng.choice([cn_mobile, cn_mobile, cn_landline, intl_phone, intl_phone])(rng),
    "email": email,
    "card": card_number,
    "cn_id": cn_id,
    "passport": passport,
    "iban": iban,
    "ip": ip,
    "address": lambda rng: en_address(rng),
    "cnaddress": lambda rng: cn_address(rng),
}

EN = [
    "Call me at {phone} after 6pm.",
    "My number is {phone}, text me anytime.",
    "You can reach the front desk on {phone}.",
    "Please update my phone to {phone} and my email to {email}.",
    "Send the invoice to {email} please.",
    "my email is {email} btw",
    "Charge it to my card {card}, expiry 09/27.",
    "The Visa ending in 1234 is old, use {card} instead.",
    "Card number: {card}",
    "My passport number is {passport}.",
    "Passport no. {passport}, issued 2019.",
    "Here is my passport: {passport} (expires 2031)",
    "Wire it to IBAN {iban}, reference rent March.",
    "My bank account is {iban}.",
    "The server at {ip} keeps timing out.",
    "I logged in from {ip} yesterday.",
    "Ship it to {address}.",
    "I moved to {address} last week.",
    "My Chinese ID is {cn_id}, for the hotel booking.",
    "Name: Lin, phone {phone}, email {email}, card {card}.",
    "Reach me at {email} or {phone}; passport {passport}.",
]
ZH = [
    "我的手机号是{phone}，有事打给我。",
    "电话：{phone}",
    "请联系{phone}，周末也可以。",
    "邮箱是{email}，发简历到这里。",
    "我的邮箱{email}，谢谢",
    "银行卡号{card}，帮我付一下。",
    "用这张卡：{card}",
    "身份证号：{cn_id}",
    "我的身份证号码是{cn_id}，订酒店要用。",
    "护照号码：{passport}",
    "我的护照号是{passport}，下个月出国。",
    "收款账户IBAN：{iban}",
    "服务器{ip}连不上了。",
    "登录IP：{ip}",
    "快递寄到{cnaddress}，谢谢。",
    "我住在{cnaddress}。",
    "姓名：王芳，手机{phone}，身份证{cn_id}，邮箱{email}。",
    "新地址是{cnaddress}，电话{phone}。",
]
EN_NEGATIVE = [
    "Order #{order} shipped on {date}.",
    "Your order number is {order}; total {price}.",
    "Tracking number {tracking}, expected {date}.",
    "The meeting is on {date} at {time}.",
    "It costs {price} including tax.",
    "Updated to version {version} yesterday.",
    "Chrome {version} fixed the bug.",
    "Release v{ipversion} is out, upgrade from {version}.",
    "Reference {badcard} was declined as invalid.",
    "That number {badcard} is not a real card.",
    "ID {badid} failed the check.",
    "Transfer code {badiban} was rejected.",
    "Room {shortnum}, employee ID {shortnum}.",
    "I need to renew my passport before {date}.",
    "Ticket {order} for the {time} train.",
    "Invoice {order} dated {date}, amount {price}.",
]
ZH_NEGATIVE = [
    "订单号：{order}，已发货。",
    "快递单号{tracking}，预计{date}送达。",
    "会议时间{date} {time}。",
    "价格{price}，包邮。",
    "升级到版本{version}了。",
    "固件版本{ipversion}有问题。",
    "编号{badid}校验不通过。",
    "这个卡号{badcard}是无效的。",
    "我的护照过期了，{date}去续签。",
    "工单{order}已处理，流水号{shortnum}。",
    "发票号码{order}，金额{price}。",
]
_SLOT = re.compile(r"\{(\w+)\}")


def fill(template: str, rng: random.Random, language: str, negative: bool) -> Line:
    """A template with its slots filled: positive slots labelled, negative ones not."""
    parts, spans, at = [], [], 0
    for match in _SLOT.finditer(template):
        parts.append(template[at : match.start()])
        slot = match.group(1)
        start = sum(len(p) for p in parts)
        if slot in POSITIVE:
            value = POSITIVE[slot](rng)
            spans.append((start, start + len(value), "address" if slot == "cnaddress" else slot))
        else:
            value = negative_value(slot, rng)
        parts.append(value)
        at = match.end()
    parts.append(template[at:])
    return Line("".join(parts), tuple(spans), negative, language)


def corpus(seed: int = 35, repeats: int = 5) -> list[Line]:
    """The corpus: every template `repeats` times with fresh values (`seed` fixes them all)."""
    rng = random.Random(seed)
    lines = []
    for _ in range(repeats):
        for templates, language, negative in ((EN, "en", False), (ZH, "zh", False), (EN_NEGATIVE, "en", True)):
            lines += [fill(t, rng, language, negative) for t in templates]
        lines += [fill(t, rng, "zh", True) for t in ZH_NEGATIVE]
    return lines
