"""Placeholder numbers per agent, kept as keyed hashes of the values they stand for.

The same value gets the same number again (`[phone#1]` every time the user's number comes back), a new value the
next number of its kind. The book never holds a value: each is normalised (digits of a phone or card, an e-mail
address in lower case, …) and hashed with HMAC-SHA256 under the agent's own random key, so the numbering table
cannot be reversed by hashing every phone number there is without that key.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Entry:
    """One number given: `[kind#number]` stands for the value whose keyed hash is `digest`."""

    kind: str
    number: int
    digest: str
    # The value itself, while the entry is new: stored (sealed) only under `privacy.keep_originals`, never logged.
    original: str = field(default="", compare=False, repr=False)


def normalise(kind: str, value: str) -> str:
    """The form two spellings of one value share: `+86 138 0013 8000` and `13800138000` are one phone number."""
    if kind in ("phone", "card", "cn_id"):
        digits = "".join(c for c in value.upper() if c.isdigit() or c == "X")
        if kind == "phone":
            digits = digits.removeprefix("00")
            if len(digits) == 13 and digits.startswith("861"):
                digits = digits[2:]  # a mainland mobile with its country code
        return digits
    if kind == "ip":
        try:
            return str(ipaddress.ip_address(value))
        except ValueError:
            return value.lower()
    if kind in ("iban", "passport"):
        return "".join(c for c in value.upper() if c.isalnum())
    return " ".join(value.lower().split())


@dataclass
class PlaceholderBook:
    """One agent's numbering: keyed hash → number, and the highest number per kind."""

    key: bytes
    numbers: dict[str, Entry] = field(default_factory=dict)

    def digest(self, kind: str, value: str) -> str:
        """The keyed hash of a value of `kind` (its normal form)."""
        message = f"{kind}\0{normalise(kind, value)}".encode()
        return hmac.new(self.key, message, hashlib.sha256).hexdigest()[:40]

    def number(self, kind: str, value: str, new: list[Entry]) -> int:
        """The value's number; a value seen for the first time gets the next one, and its entry joins `new`."""
        digest = self.digest(kind, value)
        known = self.numbers.get(digest)
        if known is not None:
            return known.number
        entry = Entry(kind, self.highest(kind) + 1, digest, value)
        self.numbers[digest] = entry
        new.append(entry)
        return entry.number

    def highest(self, kind: str) -> int:
        """The highest number given to `kind` so far (0: none)."""
        return max((e.number for e in self.numbers.values() if e.kind == kind), default=0)

    def forget(self, entries: list[Entry]) -> None:
        """Take back entries that could not be stored (another process numbered meanwhile: read again)."""
        for entry in entries:
            self.numbers.pop(entry.digest, None)
