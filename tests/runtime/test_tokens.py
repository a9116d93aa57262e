"""Token counts load offline from the shipped encodings, through a parsed cache that survives damage."""

from __future__ import annotations

from pagemind.runtime import tokens

TEXT = "Lin is allergic to peanuts; 她喜欢喝绿茶. <|endoftext|> ok"


def _fresh(name: str):
    tokens.load_encoding.cache_clear()
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
        tokens.load_encoding.cache_clear()


def test_the_encoding_keeps_its_ranks_once_and_is_one_object_however_asked_for():
    """tiktoken keeps the ranks in its Rust core and again as a Python dict (23 MB for o200k_base) that only pickling
    reads: ours drops the dict, pickles by name, and is built once per process whichever way it is asked for."""
    import marshal
    import pickle

    import tiktoken

    enc = tokens.encoding()
    assert enc is tokens.encoding(tokens.DEFAULT_ENCODING) is tokens.load_encoding("o200k_base")
    assert not hasattr(enc, "_mergeable_ranks")
    assert pickle.loads(pickle.dumps(enc)) is enc
    fields = marshal.loads(next(tokens._cache_dir().glob("o200k_base-*.marshal")).read_bytes())
    reference = tiktoken.Encoding("reference", **fields)  # tiktoken's own, with both copies of the ranks
    assert enc.encode(TEXT, disallowed_special=()) == reference.encode(TEXT, disallowed_special=())
    assert enc.decode(enc.encode(TEXT, disallowed_special=())) == TEXT and enc.n_vocab == reference.n_vocab
