"""The recognisers, kind by kind: what they must find (English and Chinese) and the hard negatives they must not
(order numbers, dates, prices, numbers that fail their check digits, version strings)."""

from __future__ import annotations

import pytest

from pagemind.runtime.privacy.checksums import cn_id_ok, iban_ok, luhn_ok
from pagemind.runtime.privacy.recognisers import KINDS, find_spans


def found(text: str, kinds: tuple[str, ...] = KINDS) -> list[tuple[str, str]]:
    return [(span.kind, span.value) for span in find_spans(text, kinds)]


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("我的手机号是13800138000，有事打给我", "13800138000"),
        ("电话：138 0013 8000", "138 0013 8000"),
        ("call +86 138-0013-8000 tonight", "+86 138-0013-8000"),
        ("(+86) 13912345678 is mine", "(+86) 13912345678"),
        ("座机 010-62345678 转 123", "010-62345678"),
        ("联系电话：(0755) 8888 9999", "(0755) 8888 9999"),
        ("Call me at (415) 555-2671 after six", "(415) 555-2671"),
        ("My phone: 555-123-4567", "555-123-4567"),
        ("ring +44 20 7946 0958 please", "+44 20 7946 0958"),
        ("Mobile: +33 (0)6 12 34 56 78", "+33 (0)6 12 34 56 78"),
        ("E.164: +14155552671.", "+14155552671"),
        ("my cell is 07700 900123", "07700 900123"),
        ("Phone 9876543210 (India)", "9876543210"),
        ("call (+44) 20 7946 0958", "(+44) 20 7946 0958"),
        ("电话 021－62345678", "021－62345678"),  # a full-width hyphen
    ],
)
def test_phone_numbers_in_both_languages(text, value):
    assert found(text) == [("phone", value)]


@pytest.mark.parametrize(
    "text",
    [
        "Order #4839201746 shipped on 2024-03-15.",
        "订单号13800138000已发货",  # an order number shaped like a mobile number
        "发票号码2771335107，金额$5,696.02。",
        "The meeting is on 07.03.2024 at 10:30.",
        "It costs $1,299.00 including tax.",
        "Room 2103, employee 4471920.",
        "这个卡号3532-7051-0956-5660是无效的",  # the tail of a card number is no phone number
        "Tracking: 9400 1000 0000 0000 0000 00",
    ],
)
def test_order_numbers_dates_and_prices_are_not_phone_numbers(text):
    assert [kind for kind, _ in found(text)] == []


def test_e_mail_addresses_next_to_chinese_and_punctuation():
    assert found("邮箱lin@example.com。") == [("email", "lin@example.com")]
    assert found("mail John.Doe@Example.CO.UK, thanks") == [("email", "John.Doe@Example.CO.UK")]
    assert found("qq: 12345678@qq.com") == [("email", "12345678@qq.com")]  # the digits stay in the address
    assert found("not an address: a..b@example.com or @home") == []


@pytest.mark.parametrize(
    "value", ["4111 1111 1111 1111", "4111-1111-1111-1111", "5555555555554444", "3782 822463 10005", "6011000990139424"]
)
def test_payment_cards_pass_luhn_with_any_grouping(value):
    assert found(f"银行卡号{value}，谢谢") == [("card", value)]
    assert found(f"Charge my card {value}, expiry 09/27") == [("card", value)]


def test_card_shaped_numbers_that_fail_luhn_or_are_orders_are_not_cards():
    assert not luhn_ok("4111111111111112")
    assert found("That number 4111 1111 1111 1112 is not a card.") == []
    assert found("order 4111111111111111 received") == []  # a Luhn-valid order number, named as one


def test_resident_ids_need_their_checksum_region_and_birth_date():
    assert cn_id_ok("11010519491231002X") and cn_id_ok("440308199901011234")
    assert found("身份证号：11010519491231002X，请核对") == [("cn_id", "11010519491231002X")]
    assert found("ID 440308199901011234 for the hotel") == [("cn_id", "440308199901011234")]
    assert not cn_id_ok("110105194912310021")  # wrong check character
    assert not cn_id_ok("110105194913310023")  # month 13
    assert not cn_id_ok("990105194912310021")  # no such region
    assert [kind for kind, _ in found("流水号110105194912310021")] == []


def test_passport_numbers_only_next_to_a_word_for_passport():
    assert found("My passport number is E12345678.") == [("passport", "E12345678")]
    assert found("护照号码：EA1234567") == [("passport", "EA1234567")]
    assert found("Mein Reisepass: C01X00T47") == [("passport", "C01X00T47")]
    assert found("passport: 123456789") == [("passport", "123456789")]
    assert found("Ticket E12345678 for the train") == []  # the same shape with no passport word
    assert found("I need to renew my passport before 20300501") == []  # a date, not a number


def test_ibans_pass_mod_97_at_their_countrys_length():
    assert iban_ok("GB82WEST12345698765432") and not iban_ok("GB82WEST12345698765433")
    assert found("IBAN: GB82 WEST 1234 5698 7654 32, ref rent") == [("iban", "GB82 WEST 1234 5698 7654 32")]
    assert found("收款账户NL91ABNA0417164300") == [("iban", "NL91ABNA0417164300")]
    assert found("code DE89 3704 0044 0532 0130 01 rejected") == []


def test_ip_addresses_but_not_version_strings():
    assert found("server 192.168.1.10 is down") == [("ip", "192.168.1.10")]
    assert found("登录IP：10.0.0.1:8080") == [("ip", "10.0.0.1")]
    assert found("from 2001:db8:85a3::8a2e:370:7334 today") == [("ip", "2001:db8:85a3::8a2e:370:7334")]
    assert found("mapped ::ffff:192.0.2.128, gw fe80::1.") == [("ip", "::ffff:192.0.2.128"), ("ip", "fe80::1")]
    assert found("version 2.4.1.0, v1.2.3.4, 固件版本4.3.2.1, Chrome 120.0.6099.109") == []
    assert found("at 12:30:45 and 256.1.1.1 and 00:1A:2B:3C:4D:5E") == []


def test_street_addresses_english_and_chinese():
    assert found("I moved to 221B Baker Street last week.") == [("address", "221B Baker Street")]
    assert found("Ship to 1600 Pennsylvania Avenue NW, Washington, DC 20500") == [
        ("address", "1600 Pennsylvania Avenue NW, Washington, DC 20500")
    ]
    assert found("寄到北京市朝阳区建国路88号3号楼2单元501室，谢谢") == [
        ("address", "北京市朝阳区建国路88号3号楼2单元501室")
    ]
    assert found("我住在成都市武侯区人民南路四段1号") == [("address", "成都市武侯区人民南路四段1号")]
    assert found("Read chapter 12 of the book") == []


def test_overlaps_resolve_to_one_span_whatever_the_kinds_order():
    text = "write to 13800138000@qq.com or call 13800138000"
    spans = find_spans(text, KINDS)
    assert [(s.kind, s.value) for s in spans] == [("email", "13800138000@qq.com"), ("phone", "13800138000")]
    assert find_spans(text, tuple(reversed(KINDS))) == spans
    # an 18-digit resident ID of Gansu (62…, a UnionPay prefix) that also passes Luhn is an ID, never a card too
    both = next(
        value
        for n in range(1000)
        for check in "0123456789"
        if cn_id_ok(value := f"62010219900101{n:03d}{check}") and luhn_ok(value)
    )
    assert [s.kind for s in find_spans(f"ID {both}", KINDS)] == ["cn_id"]


def test_only_the_kinds_asked_for_are_found():
    text = "mail lin@example.com, phone 13800138000, server 10.0.0.1"
    assert found(text, ("email",)) == [("email", "lin@example.com")]
    assert [kind for kind, _ in found(text, ("phone", "ip"))] == ["phone", "ip"]


def test_long_hostile_input_stays_linear_enough():
    # nested repetitions over "市区县…" once backtracked through every split (seconds); now one pass
    assert find_spans("市区县" * 3000, KINDS) == []
    assert find_spans("1-" * 5000, KINDS) == []
