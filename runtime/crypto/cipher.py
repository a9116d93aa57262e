"""`TextCipher`: AES-256-GCM over stored text, and the keyed hashes that stand in for text where a store matches it.

A sealed value is `pmenc1:<key id>:<base64url(nonce ‖ ciphertext ‖ tag)>`: versioned, so a reader tells it from a
plaintext row of a store written before encryption was on, and named by its key, so a rotation
(`pagemind keys rotate-data`) knows which rows are already under the new key. The nonce is 12 random bytes per value;
the prefix is the authenticated data, so a value cannot be passed off as another key's.

The blind index: the keyword index holds, instead of each term (a stem, a CJK bigram), the HMAC of the term under
the index key, written as 16 letters `a`–`p` (64 bits: a plain word to both SQLite FTS5 and Postgres' `simple`
parser). Queries are blinded the same way, so matching and BM25 work as before, on tokens that say nothing
without the key. The index key is random, kept sealed under the data key in the database's key-check record
(`state.encryption`), so a rotation re-seals it instead of rebuilding every index.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from collections.abc import Sequence

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from pagemind.runtime.crypto.keys import DataKey, EncryptionKeyError

PREFIX = "pmenc1:"
_PREFIX_BYTES = PREFIX.encode()
NONCE_BYTES = 12
_LETTERS = bytes.maketrans(b"0123456789abcdef", b"abcdefghijklmnop")
_BLIND_CACHE = 65536  # terms remembered per cipher (a stem's hash costs ~1 µs; a document repeats its terms)


class EncryptedDataError(EncryptionKeyError):
    """A sealed value read where no key (or not its key) is at hand: never shown as if it were the text."""


def is_sealed(value: str) -> bool:
    """Whether a stored text is a sealed value (else it is plaintext, from before encryption)."""
    return value.startswith(PREFIX)


def key_id_of(value: str) -> str | None:
    """The id of the key a sealed value is under (None: plaintext)."""
    if not value.startswith(PREFIX):
        return None
    return value[len(PREFIX) : len(PREFIX) + 8]


class TextCipher:
    """Seals with `primary`, opens with any key of the ring (`primary` and `others`: a rotation in progress);
    blinds terms and keys texts with `index_key`."""

    def __init__(self, primary: DataKey, index_key: bytes, others: Sequence[DataKey] = ()):
        self.primary = primary
        self.key_id = primary.key_id
        self.keys = {k.key_id: k for k in (*others, primary)}
        self._aead = {key_id: AESGCM(k.secret) for key_id, k in self.keys.items()}
        self.index_key = index_key
        self._cache_key = hmac.new(index_key, b"embedding cache", hashlib.sha256).digest()
        self._blinded: dict[str, str] = {}

    def with_primary(self, primary: DataKey) -> TextCipher:
        """This ring with `primary` sealing (and every key of this ring still opening): a rotation's cipher."""
        return TextCipher(primary, self.index_key, [k for k in self.keys.values() if k.key_id != primary.key_id])

    # -- sealing ------------------------------------------------------------------------------------------------

    def seal(self, text: str) -> str:
        """`text` sealed under the primary key."""
        return self.seal_bytes(text.encode("utf-8")).decode("ascii")

    def open(self, value: str) -> str:
        """The text of a sealed value; a plaintext value (from before encryption) as it is."""
        if not value.startswith(PREFIX):
            return value
        return self.open_bytes(value.encode("ascii")).decode("utf-8")

    def seal_bytes(self, data: bytes) -> bytes:
        """`data` sealed under the primary key, as ASCII (`pmenc1:<key id>:<base64url>`)."""
        head = _PREFIX_BYTES + self.key_id.encode() + b":"
        nonce = os.urandom(NONCE_BYTES)
        body = self._aead[self.key_id].encrypt(nonce, data, head)
        return head + base64.urlsafe_b64encode(nonce + body)

    def open_bytes(self, sealed: bytes) -> bytes:
        """The bytes of a sealed value (raises `EncryptedDataError` for another key's value or a damaged one)."""
        head_end = len(_PREFIX_BYTES) + 9
        head, key_id = sealed[:head_end], sealed[len(_PREFIX_BYTES) : head_end - 1].decode("ascii", "replace")
        aead = self._aead.get(key_id)
        if aead is None:
            raise EncryptedDataError(
                f"a stored value is sealed under the data key {key_id}, not the key given ({self.key_id}): "
                "set PAGEMIND_ENCRYPTION_KEY (or PAGEMIND_ENCRYPTION_KEY_FILE) to the database's key"
            )
        try:
            raw = base64.urlsafe_b64decode(sealed[head_end:])
            return aead.decrypt(raw[:NONCE_BYTES], raw[NONCE_BYTES:], head)
        except (InvalidTag, ValueError) as exc:
            raise EncryptedDataError(
                f"a stored value under the data key {key_id} does not decrypt (damaged, or altered)"
            ) from exc

    def opens(self, key_id: str) -> bool:
        """Whether values under the key `key_id` can be opened by this ring."""
        return key_id in self._aead

    # -- keyed hashes -------------------------------------------------------------------------------------------

    def blind(self, term: str) -> str:
        """A term as the blind index holds it: 16 letters a–p, a keyed hash of it."""
        found = self._blinded.get(term)
        if found is None:
            digest = hmac.new(self.index_key, term.encode("utf-8"), hashlib.sha256).hexdigest()[:16]
            found = digest.encode().translate(_LETTERS).decode()
            if len(self._blinded) < _BLIND_CACHE:
                self._blinded[term] = found
        return found

    def blind_terms(self, analysed: str) -> str:
        """Analysed terms (space-separated: `retrieval.keywords.analysed`) blinded one by one, in order."""
        return " ".join(self.blind(term) for term in analysed.split())

    def text_key(self, text: str) -> str:
        """The embedding cache's key of a text: its HMAC (hex), not a plain hash anyone could confirm a guess by."""
        return hmac.new(self._cache_key, text.encode("utf-8"), hashlib.sha256).hexdigest()


def key_cipher(key: DataKey | None) -> TextCipher | None:
    """A cipher of the data key alone, for what is sealed with no index key at hand (a trace file, read without
    opening the database); None without a key."""
    return TextCipher(key, b"") if key is not None else None
