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
from typing import Any

import tiktoken

from pagemind.runtime.process.heap import release_free_memory
from pagemind.runtime.process.home import cache_folder
from pagemind.runtime.process.settings import Settings

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
    configured: Path | None = Settings.read("tiktoken_cache")
    return configured or cache_folder() / "tiktoken"


def seed_cache(name: str, cache: Path) -> None:
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


class LeanEncoding(tiktoken.Encoding):
    """A tiktoken Encoding whose ranks live only in tiktoken's Rust core.

    tiktoken keeps the 200,000 ranks twice: in the Rust core that encodes, and as a Python dict of bytes that only
    pickling reads. The dict is 23 MB of an agent process's resident memory (bench/RESULTS.md, "Process memory"),
    so it is dropped once the core is built; a pickled encoding is loaded again by name in the other process.
    """

    def __init__(self, name: str, *, pat_str: str, mergeable_ranks: dict[bytes, int], special_tokens: dict[str, int]):
        super().__init__(name, pat_str=pat_str, mergeable_ranks=mergeable_ranks, special_tokens=special_tokens)
        del self._mergeable_ranks

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return encoding, (self.name,)


def encoding(name: str = DEFAULT_ENCODING) -> LeanEncoding:
    """The tiktoken encoding `name` (one per process, however it is asked for: see `load_encoding`)."""
    return load_encoding(name)


@functools.cache
def load_encoding(name: str) -> LeanEncoding:
    """The tiktoken encoding `name`, built once per process, never downloaded: seeded from package data on first
    use. (No default: `functools.cache` keys on the arguments as given, so `encoding()` and
    `encoding("o200k_base")` would each build one, 43 MB apiece.)

    tiktoken parses its 200,000-line base64 file on every start (about half of a `pagemind run`'s token set-up);
    the parsed ranks are kept beside it with `marshal`, which loads them several times faster. The encoding is
    built here, not by `tiktoken.get_encoding`, whose registry would keep a second copy with the Python ranks.
    """
    if name not in _SHA256:
        raise ValueError(f"unknown encoding {name!r}; shipped: {', '.join(_SHA256)}")
    cache = _cache_dir()
    parsed = cache / f"{name}-{_SHA256[name][:16]}.marshal"
    try:
        loaded = LeanEncoding(name, **marshal.loads(parsed.read_bytes()))
        release_free_memory()  # the parsed ranks, now in the Rust core: ≈ 4 MB
        return loaded
    except (OSError, EOFError, ValueError, TypeError, KeyError):
        pass  # not there yet, or unreadable: parse the source and write it again
    seed_cache(name, cache)
    Settings.export("TIKTOKEN_CACHE_DIR", str(cache))
    from tiktoken_ext.openai_public import ENCODING_CONSTRUCTORS

    source = ENCODING_CONSTRUCTORS[name]()
    fields = {key: source[key] for key in ("pat_str", "mergeable_ranks", "special_tokens")}
    with tempfile.NamedTemporaryFile(dir=cache, delete=False) as tmp:
        tmp.write(marshal.dumps(fields))
    os.replace(tmp.name, parsed)
    return LeanEncoding(name, **fields)


def count_tokens(text: str, encoding_name: str = DEFAULT_ENCODING) -> int:
    """Tokens in `text`."""
    return len(encoding(encoding_name).encode(text, disallowed_special=()))
