"""Encryption at rest: the AES-GCM cipher every stored text goes through, the data key, and the blind index.

- `keys`: a data key from `PAGEMIND_ENCRYPTION_KEY` or `PAGEMIND_ENCRYPTION_KEY_FILE` (`Settings`).
- `cipher`: `TextCipher`, which seals a text as `pmenc1:<key id>:<base64>` and opens it again, and the keyed hashes
  that stand in for text where a store must match it (the keyword index's terms, the embedding cache's keys).
- `columns`: `EncryptedText` and `EncryptedJSON`, the column types that seal on write and open on read with the
  cipher bound to the engine (`bind_cipher`); never a process-wide one.

What stays readable is said in docs/pages/guide/encryption.md.
"""
