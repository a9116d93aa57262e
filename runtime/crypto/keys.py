"""The data key: 32 random bytes, given as base64 (or 64 hex digits) in `PAGEMIND_ENCRYPTION_KEY` or in the file
`PAGEMIND_ENCRYPTION_KEY_FILE` names. `pagemind keys new-data-key` prints a fresh one."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pagemind.runtime.process.settings import Settings

KEY_BYTES = 32  # AES-256


class EncryptionKeyError(RuntimeError):
    """A key that cannot be used (malformed, unreadable), or a database that does not accept the key given (or
    needs one); the message says which and what to do."""


@dataclass(frozen=True)
class DataKey:
    """A data key and its public id (a keyed hash of it: the id names the key in every sealed value and in the
    database's key-check record without revealing anything of it)."""

    secret: bytes = field(repr=False)

    @property
    def key_id(self) -> str:
        """Eight hex digits that name this key."""
        return hmac.new(self.secret, b"pagemind key id", hashlib.sha256).hexdigest()[:8]

    def derived(self, purpose: str) -> bytes:
        """A sub-key of this key for one purpose (HKDF-like: HMAC of the purpose under the key)."""
        return hmac.new(self.secret, purpose.encode(), hashlib.sha256).digest()


def parse_key(text: str, where: str) -> DataKey:
    """The key a variable or file holds: 32 bytes as base64 (standard or URL-safe) or as 64 hex digits."""
    raw = text.strip()
    decoded: bytes | None = None
    if len(raw) == 2 * KEY_BYTES:
        try:
            decoded = bytes.fromhex(raw)
        except ValueError:
            decoded = None
    if decoded is None:
        try:
            decoded = base64.b64decode(raw.replace("-", "+").replace("_", "/") + "=" * (-len(raw) % 4), validate=True)
        except (binascii.Error, ValueError):
            decoded = None
    if decoded is None or len(decoded) != KEY_BYTES:
        raise EncryptionKeyError(
            f"{where} is not an encryption key: it takes 32 random bytes as base64 or 64 hex digits "
            "(`pagemind keys new-data-key` prints one)"
        )
    return DataKey(decoded)


def load_key(key_text: str | None, key_file: Path | None) -> DataKey | None:
    """The data key the settings give (`PAGEMIND_ENCRYPTION_KEY`, else the file `PAGEMIND_ENCRYPTION_KEY_FILE`
    names), or None: encryption off."""
    if key_text:
        return parse_key(key_text, "PAGEMIND_ENCRYPTION_KEY")
    if key_file is not None:
        return read_key_file(key_file, "PAGEMIND_ENCRYPTION_KEY_FILE")
    return None


def read_key_file(path: Path, what: str) -> DataKey:
    """The key in a key file."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise EncryptionKeyError(f"cannot read the key file {path} ({what}): {exc.strerror or exc}") from None
    return parse_key(text, f"the key file {path}")


def new_key_text() -> str:
    """A fresh random key, as base64 (what a key file or `PAGEMIND_ENCRYPTION_KEY` holds)."""
    return base64.b64encode(secrets.token_bytes(KEY_BYTES)).decode()


@dataclass(frozen=True)
class Encryption:
    """What the settings say about encryption at rest: the data key, or None (off). Given to `make_engine`, which
    checks it against the database's key-check record and binds the cipher to the engine."""

    key: DataKey | None

    @classmethod
    def of(cls, settings: Settings) -> Encryption:
        """The settings' choice (`PAGEMIND_ENCRYPTION_KEY`, `PAGEMIND_ENCRYPTION_KEY_FILE`)."""
        return cls(load_key(settings.encryption_key, settings.encryption_key_file))
