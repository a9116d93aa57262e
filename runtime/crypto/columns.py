"""The encrypted column types: a column declared with one stores sealed text when its engine has a cipher bound
(`bind_cipher`), and plaintext, exactly as a `Text`/`JSON` column, when it has none.

    from pagemind.runtime.crypto.columns import EncryptedText
    Column("original", EncryptedText, nullable=False)      # that is all a table needs to opt in

Reads open sealed values with the engine's cipher, and pass plaintext values (a store written before encryption)
through; a sealed value read on an engine without a key raises `EncryptedDataError`, never returns ciphertext as
text. The cipher hangs off the engine's dialect object (one per engine), so two engines in one process can use two
keys (or none); nothing is process-wide.

A sealed column cannot be compared in SQL (`WHERE text = :x`): the nonce is random. Match on a keyed hash kept
beside it instead (`TextCipher.text_key`, `TextCipher.blind`).
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import JSON, Text
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator

from pagemind.runtime.crypto.cipher import EncryptedDataError, TextCipher, is_sealed

_ATTRIBUTE = "pagemind_cipher"


def bind_cipher(engine: Any, cipher: TextCipher | None) -> None:
    """Make `engine` (an `Engine`) seal and open its encrypted columns with `cipher` (None: plaintext)."""
    setattr(engine.dialect, _ATTRIBUTE, cipher)


def cipher_of(owner: Any) -> TextCipher | None:
    """The cipher bound to an engine, a connection or a dialect (None: encryption off there)."""
    dialect = getattr(owner, "dialect", owner)
    found: TextCipher | None = getattr(dialect, _ATTRIBUTE, None)
    return found


def _no_key() -> EncryptedDataError:
    return EncryptedDataError(
        "this database holds encrypted text and was opened without its key: set PAGEMIND_ENCRYPTION_KEY "
        "(or PAGEMIND_ENCRYPTION_KEY_FILE)"
    )


def open_text(value: str, cipher: TextCipher | None) -> str:
    """A stored text as its reader sees it: opened when sealed (an error without a cipher), else as stored."""
    if not is_sealed(value):
        return value
    if cipher is None:
        raise _no_key()
    return cipher.open(value)


def seal_text(value: str, cipher: TextCipher | None) -> str:
    """A text as an encrypted column stores it (NUL replaced first, as every stored text: `state.records`)."""
    value = value.replace("\x00", "\ufffd")
    return cipher.seal(value) if cipher is not None else value


class EncryptedText(TypeDecorator[str]):
    """`Text`, sealed at rest when the engine has a cipher."""

    impl = Text
    cache_ok = True

    def process_bind_param(self, value: str | None, dialect: Dialect) -> str | None:
        """Seal on the way in."""
        return None if value is None else seal_text(value, cipher_of(dialect))

    def process_result_value(self, value: str | None, dialect: Dialect) -> str | None:
        """Open on the way out."""
        return None if value is None else open_text(value, cipher_of(dialect))


class EncryptedJSON(TypeDecorator[Any]):
    """`JSON`, sealed at rest when the engine has a cipher: the document's JSON text sealed, stored as a JSON
    string."""

    impl = JSON
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Dialect) -> Any:
        """Seal the JSON text on the way in."""
        cipher = cipher_of(dialect)
        if value is None or cipher is None:
            return value
        return cipher.seal(json.dumps(value))

    def process_result_value(self, value: Any, dialect: Dialect) -> Any:
        """Open a sealed document on the way out."""
        if isinstance(value, str) and is_sealed(value):
            return json.loads(open_text(value, cipher_of(dialect)))
        return value
