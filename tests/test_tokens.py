"""Token counts load offline from the shipped encodings, through a parsed cache that survives damage."""

from __future__ import annotations

from pagemind.runtime import tokens

TEXT = "Lin is allergic to peanuts; 她喜欢喝绿茶. <|endoftext|> ok"


def _fresh(name: str):
    tokens.encoding.cache_clear()
    return tokens.encoding(name)


def test_the_parsed_cache_gives_the_same_tokens_and_a_damaged_one_is_rewritten(tmp_path, monkeypatch):
    monkeypatch.setenv("PAGEMIND_TIKTOKEN_CACHE", str(tmp_path))
    try:
        parsed = _fresh("cl100k_base")  # first use: parses the shipped file, writes the cache
        [cache] = tmp_path.glob("cl100k_base-*.marshal")
        cached = _fresh("cl100k_base")
        assert cached.encode(TEXT, disallowed_special=()) == parsed.encode(TEXT, disallowed_special=())
        assert cached.encode(TEXT, disallowed_special=()) != []

        cache.write_bytes(cache.read_bytes()[:1000])  # a torn write
        repaired = _fresh("cl100k_base")
        assert repaired.encode(TEXT, disallowed_special=()) == parsed.encode(TEXT, disallowed_special=())
        assert len(cache.read_bytes()) > 1000
    finally:
        tokens.encoding.cache_clear()
