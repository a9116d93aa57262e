"""Keyword analysis for the BM25 half of hybrid search: lower-case words, stop words out, Snowball stems,
CJK as overlapping character bigrams. Documents and queries go through the same function, so the SQL
full-text index (SQLite FTS5, Postgres tsvector) and Qdrant's sparse BM25 only ever see normalised terms."""

from __future__ import annotations

import functools
import re

from py_rust_stemmers import SnowballStemmer

STOP_WORDS = frozenset(
    """
a an the and or but if of at by for with about against between into through during before after above below to
from up down in out on off over under again further then once here there when where why how all any both each few
more most other some such no nor not only own same so than too very s t can will just don should now i me my myself
we our ours ourselves you your yours yourself yourselves he him his himself she her hers herself it its itself they
them their theirs themselves what which who whom this that these those am is are was were be been being have has
had having do does did doing would could ought let also get got yes yeah oh hey hi
""".split()
)

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
# A word stops where CJK starts: "我在google做产品经理" is 我在 / google / 做产品经理, not 我在 / google做产品经理.
_TOKEN = re.compile(rf"[{_CJK}]+|[^\W_{_CJK}]+(?:'[^\W_{_CJK}]+)?", re.UNICODE)
_IS_CJK = re.compile(rf"[{_CJK}]")
_stemmer = SnowballStemmer("english")


def _cjk_bigrams(run: str) -> list[str]:
    return [run] if len(run) == 1 else [run[i : i + 2] for i in range(len(run) - 1)]


@functools.lru_cache(maxsize=65536)
def _stem(word: str) -> str:
    stem: str = _stemmer.stem_word(word)
    return stem


def terms(text: str) -> list[str]:
    """The normalised terms of a text, in order (repeats kept: they are term frequencies)."""
    out: list[str] = []
    for token in _TOKEN.findall(text.lower()):
        if _IS_CJK.match(token):
            out += _cjk_bigrams(token)
            continue
        word = token.split("'")[0]  # "caroline's" → "caroline", "don't" → "don" (a stop word)
        if word and word not in STOP_WORDS:
            out.append(_stem(word))
    return out


def analysed(text: str) -> str:
    """The terms of a text joined by spaces: what the full-text index stores and matches."""
    return " ".join(terms(text))


def query_terms(text: str) -> list[str]:
    """The distinct terms of a query, in order."""
    return list(dict.fromkeys(terms(text)))
