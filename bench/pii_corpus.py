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


# -- written by hand: formats and contexts the templates above do not use (a check on over-fitting to them) ------------

HAND: list[tuple[str, list[tuple[str, str]]]] = [
    ("Text me on 555-123-4567 when you land", [("555-123-4567", "phone")]),
    ("tel. +49 (0)30 1234567 (office)", [("+49 (0)30 1234567", "phone")]),
    ("WhatsApp: +44 (0) 7911 123456", [("+44 (0) 7911 123456", "phone")]),
    ("Mobile +61-412-345-678, email ops@acme.io", [("+61-412-345-678", "phone"), ("ops@acme.io", "email")]),
    ("她的号是 186-1234-5678 别告诉别人", [("186-1234-5678", "phone")]),
    ("客服热线 400-800-8888", [("400-800-8888", "phone")]),  # a business's, but a phone number
    ("座机（021）5012 3456，分机 8", [("（021）5012 3456", "phone")]),
    ("我电话换了，新号15912345678", [("15912345678", "phone")]),
    ("打 0086 13512345678 找我", [("0086 13512345678", "phone")]),
    ("Call 1-800-555-0199 for support", [("1-800-555-0199", "phone")]),
    ("the ISBN is 978-0-306-40615-7", []),
    ("Flight CA1234 departs 14:05, gate 23", []),
    ("population 1,412,000,000 in 2023", []),
    ("Invoice INV-2024-000123, total 1 234,56 €", []),
    ("My email: Zhang_San99@Outlook.com!", [("Zhang_San99@Outlook.com", "email")]),
    ("联系邮箱：service@jd.com 或者留言", [("service@jd.com", "email")]),
    ("file me@2x.png in the assets folder", []),
    ("pay with 4000 0566 5566 5556 please", [("4000 0566 5566 5556", "card")]),
    ("我的招行卡 6225 8801 3725 8736 ，尾号8736", []),  # fails Luhn as written (a typo): not a card
    ("card: 5105-1051-0510-5100 exp 11/29 cvv 123", [("5105-1051-0510-5100", "card")]),
    ("amex 378282246310005", [("378282246310005", "card")]),
    ("serial number 4929 1234 5678 9012", []),
    ("身份证 34052419800101001X 复印件", [("34052419800101001X", "cn_id")]),
    ("公民身份号码 510104 19900307 1234", []),  # checksum fails
    ("ID card 320311770706001", []),  # an old 15-digit number: not recognised
    ("passport # 912803456, nationality US", [("912803456", "passport")]),
    ("护照号码为 G12345678，签发地北京", [("G12345678", "passport")]),
    ("my passport photo is from 2019", []),
    ("Passnummer / Reisepass: C4J9H2X71", [("C4J9H2X71", "passport")]),
    ("IBAN FR76 3000 6000 0112 3456 7890 189 for the deposit", [("FR76 3000 6000 0112 3456 7890 189", "iban")]),
    ("Kontonummer DE44 5001 0517 5407 3249 31", [("DE44 5001 0517 5407 3249 31", "iban")]),
    ("ref GB00 WEST 1234 5698 7654 32", []),
    ("ssh root@203.0.113.7 -p 22", [("203.0.113.7", "ip")]),
    ("服务器地址 172.16.254.1，端口 443", [("172.16.254.1", "ip")]),
    ("gateway fe80::1%eth0", [("fe80::1", "ip")]),
    ("running kernel 5.15.0.91 and node v18.17.1", []),
    ("the ratio was 1.5.2.0 in the spec", [("1.5.2.0", "ip")]),  # a dotted quad with no version word: an IP
    ("deliver to 10 Downing Street, London", [("10 Downing Street", "address")]),
    (
        "our office: 350 Fifth Avenue, Suite 3300, New York, NY 10118",
        [("350 Fifth Avenue, Suite 3300, New York, NY 10118", "address")],
    ),
    ("Hauptstraße 12a, 10115 Berlin", [("Hauptstraße 12a", "address")]),
    ("送到杭州市余杭区文一西路969号", [("杭州市余杭区文一西路969号", "address")]),
    ("我家在南京市鼓楼区中山路18号5栋302室", [("南京市鼓楼区中山路18号5栋302室", "address")]),
    ("see you on Baker Street tomorrow", []),
    ("we walked 5 miles down the road", []),
    ("orders 100-200-3000 and 100-200-3001 shipped", []),
    ("tracking 1Z999AA10123456784 arrives Friday", []),
    ("2024/03/15 10:30:00 UTC", []),
    ("price ¥13,800.00 (was ¥15,999)", []),
    ("温度 36.5 度，体重 62.3 公斤", []),
    ("call me at 138 0013 8000 or mail lin@example.com", [("138 0013 8000", "phone"), ("lin@example.com", "email")]),
]


def hand_corpus() -> list[Line]:
    """`HAND` as labelled lines (each value's first occurrence, in order)."""
    lines = []
    for text, values in HAND:
        spans, at = [], 0
        for value, kind in values:
            start = text.index(value, at)
            spans.append((start, start + len(value), kind))
            at = start + len(value)
        lines.append(
            Line(text, tuple(spans), not values, "zh" if any("\u4e00" <= c <= "\u9fff" for c in text) else "en")
        )
    return lines
