"""The check digits that tell a real identifier from a number shaped like one: Luhn (payment cards), ISO 7064
MOD 11-2 (mainland China resident IDs, with their birth date and region), ISO 13616 mod 97 (IBANs)."""

from __future__ import annotations

from datetime import date

# ISO 7064 MOD 11-2 weights of the first 17 digits of a resident ID, and the check character for each remainder.
_CN_WEIGHTS = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
_CN_CHECK = "10X98765432"
# The first two digits of a resident ID: a province-level region (GB/T 2260), 71/81/82 for Taiwan, Hong Kong, Macao.
_CN_REGIONS = frozenset(
    {11, 12, 13, 14, 15, 21, 22, 23, 31, 32, 33, 34, 35, 36, 37, 41, 42, 43, 44, 45, 46, 50, 51, 52, 53, 54, 61, 62}
    | {63, 64, 65, 71, 81, 82, 83, 91}
)
# IBAN lengths by country (ISO 13616 registry; the countries a user is likely to paste): a wrong length is no IBAN.
IBAN_LENGTHS = {
    "AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22, "BH": 22, "BR": 29, "CH": 21,
    "CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DK": 18, "DO": 28, "EE": 20, "EG": 29, "ES": 24, "FI": 18, "FO": 18,
    "FR": 27, "GB": 22, "GE": 22, "GI": 23, "GL": 18, "GR": 27, "GT": 28, "HR": 21, "HU": 28, "IE": 22, "IL": 23,
    "IQ": 23, "IS": 26, "IT": 27, "JO": 30, "KW": 30, "KZ": 20, "LB": 28, "LI": 21, "LT": 20, "LU": 20, "LV": 21,
    "MC": 27, "MD": 24, "ME": 22, "MK": 19, "MR": 27, "MT": 31, "MU": 30, "NL": 18, "NO": 15, "PK": 24, "PL": 28,
    "PS": 29, "PT": 25, "QA": 29, "RO": 24, "RS": 22, "SA": 24, "SE": 24, "SI": 19, "SK": 24, "SM": 27, "TN": 24,
    "TR": 26, "UA": 29, "VG": 24, "XK": 20,
}  # fmt: skip


def luhn_ok(digits: str) -> bool:
    """Whether a string of digits passes the Luhn check (every payment card number does)."""
    total = 0
    for index, char in enumerate(reversed(digits)):
        value = ord(char) - 48
        if index % 2:
            value *= 2
            if value > 9:
                value -= 9
        total += value
    return total % 10 == 0


def cn_id_ok(text: str, today: date | None = None) -> bool:
    """Whether 18 characters are a plausible mainland China resident ID: a known region, a real birth date between
    1900 and today, and the ISO 7064 MOD 11-2 check character (a digit or X)."""
    if len(text) != 18 or not text[:17].isdigit() or int(text[:2]) not in _CN_REGIONS:
        return False
    try:
        born = date(int(text[6:10]), int(text[10:12]), int(text[12:14]))
    except ValueError:
        return False
    if not date(1900, 1, 1) <= born <= (today or date.today()):
        return False
    total = sum(int(digit) * weight for digit, weight in zip(text[:17], _CN_WEIGHTS, strict=True))
    return _CN_CHECK[total % 11] == text[17].upper()


def iban_ok(compact: str) -> bool:
    """Whether an IBAN without spaces has its country's length and passes the mod-97 check."""
    compact = compact.upper()
    if IBAN_LENGTHS.get(compact[:2]) != len(compact) or not compact.isalnum():
        return False
    moved = compact[4:] + compact[:4]
    number = "".join(str(int(char, 36)) for char in moved)
    return int(number) % 97 == 1
