"""Exact token counts with tiktoken, loaded offline from encodings shipped as package data."""

from __future__ import annotations

import functools
import gzip
import hashlib
import marshal
import os
import tempfile
from importlib import resources
from pathlib import Path

import tiktoken

_BLOB_URL = "https://openaipublic.blob.core.windows.net/encodings/{name}.tiktoken"
_SHA256 = {
    "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
}
DEFAULT_ENCODING = "o200k_base"

# OpenAI's documented chat accounting: every message costs a few tokens of framing, every reply is primed.
TOKENS_PER_MESSAGE = 3
TOKENS_PER_NAME = 1
TOKENS_REPLY_PRIMING = 3


def _cache_dir() -> Path:
    return Path(os.environ.get("PAGEMIND_TIKTOKEN_CACHE") or Path(tempfile.gettempdir()) / "pagemind-tiktoken")


def _seed_cache(name: str, cache: Path) -> None:
    """Write the shipped encoding where tiktoken looks for its download (file name: sha1 of the URL)."""
    key = hashlib.sha1(_BLOB_URL.format(name=name).encode()).hexdigest()
    target = cache / key
    if target.exists():
        return
    packaged = resources.files("pagemind.runtime.data") / "tiktoken" / f"{name}.tiktoken.gz"
    data = gzip.decompress(packaged.read_bytes())
    if hashlib.sha256(data).hexdigest() != _SHA256[name]:
        raise RuntimeError(f"shipped tiktoken encoding {name} is corrupt (sha256 mismatch)")
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=cache, delete=False) as tmp:
        tmp.write(data)
    os.replace(tmp.name, target)


@functools.cache
def encoding(name: str = DEFAULT_ENCODING) -> tiktoken.Encoding:
    """The tiktoken encoding `name`, never downloaded: seeded from package data on first use.

    tiktoken parses its 200,000-line base64 file on every start (about half of a `pagemind run`'s token set-up);
    the parsed ranks are kept beside it with `marshal`, which loads them several times faster.
    """
    if name not in _SHA256:
        raise ValueError(f"unknown encoding {name!r}; shipped: {', '.join(_SHA256)}")
    cache = _cache_dir()
    parsed = cache / f"{name}-{_SHA256[name][:16]}.marshal"
    try:
        fields = marshal.loads(parsed.read_bytes())
        return tiktoken.Encoding(name=name, **fields)
    except (OSError, EOFError, ValueError, TypeError, KeyError):
        pass  # not there yet, or unreadable: parse the source and write it again
    _seed_cache(name, cache)
    os.environ["TIKTOKEN_CACHE_DIR"] = str(cache)
    loaded = tiktoken.get_encoding(name)
    fields = {"pat_str": loaded._pat_str, "mergeable_ranks": loaded._mergeable_ranks,
              "special_tokens": loaded._special_tokens}
    with tempfile.NamedTemporaryFile(dir=cache, delete=False) as tmp:
        tmp.write(marshal.dumps(fields))
    os.replace(tmp.name, parsed)
    return loaded


def count_tokens(text: str, encoding_name: str = DEFAULT_ENCODING) -> int:
    """Tokens in `text`."""
    return len(encoding(encoding_name).encode(text, disallowed_special=()))
