"""Matching a request's words against what an agent keeps, and the topics an agent must not bring up.

    matcher = TopicMatcher("home address", embedder, min_similarity=0.7, every_word=True)
    matcher.matches(["Sam lives at 12 Quillfeather Lane", "Sam's home address is 12 Quillfeather Lane"])
    mutes = MutedTopics(agent_id, engine, embedder)
    mutes.mute("my ex Mark"); mutes.touches("Mark called again")  # True

A text matches a query by keywords or by meaning:

- keywords: the query's content words (lowercased; a stop list of function words and "user"/"my" left out), each
  found in the text as a whole word, or, for a run of CJK characters (which has no spaces), as a substring. A forget
  needs every word (`every_word=True`: "home address" does not remove every text that says "home"); a mute needs any
  one (a muted topic is left out wherever it is named);
- meaning: the cosine of the text's and the query's embeddings (the agent's embedder, cached) at or above
  `min_similarity`. Forget uses 0.70 (all-MiniLM-L6-v2: a paraphrase of the same fact scores above it, a fact
  that merely shares a subject below), mute 0.55 (it errs on the side of leaving out).

`MutedTopics` is stored per agent (`muted_topics`, migration 0012) and read again at each use (one indexed read),
so a mute from the CLI or the API reaches a running agent at its next search.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any, TypeVar

import numpy as np
import structlog
from sqlalchemy import delete, select
from sqlalchemy.engine import Engine

from pagemind.runtime.memory.embedding.embedders import Embedder
from pagemind.runtime.state.dialects import dialect
from pagemind.runtime.state.records import utcnow
from pagemind.runtime.state.tables.memory import muted_topics

log = structlog.get_logger("pagemind.topics")

FORGET_SIMILARITY = 0.70
MUTE_SIMILARITY = 0.55
MAX_TOPIC_CHARS = 200

_WORD = re.compile(r"[\w'-]+", re.UNICODE)
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]+")
_STOP = frozenset(
    "a an the my me i i'm mine our your his her their its this that these those of in on at to for from with about "
    "and or not no any all some is are was were be been do does did has have had it he she they them him we you "
    "user user's users please again anything everything something thing things stuff forget mute talk bring up "
    "mention remember don't dont never".split()
)
# Function characters of Chinese and Japanese that carry no topic ("别再提他了": 提 and 他 stay, 别 再 了 go).
_CJK_STOP = frozenset("的了吗呢吧啊呀我你您别再不要把给和与及在是就都也还请忘记提起说过")

T = TypeVar("T")


def query_words(query: str) -> list[str]:
    """The content words of a query: lowercased words not on the stop list, and its CJK runs with function
    characters removed (each run a word, matched as a substring)."""
    text = query.lower()
    words = [w.strip("'-") for w in _WORD.findall(_CJK.sub(" ", text))]
    found = [w for w in words if len(w) > 1 and w not in _STOP]
    for run in _CJK.findall(text):
        kept = "".join(ch for ch in run if ch not in _CJK_STOP)
        if kept:
            found.append(kept)
    return list(dict.fromkeys(found))


def _has_word(text: str, word: str) -> bool:
    if _CJK.fullmatch(word):
        return word in text
    return re.search(rf"(?<![\w]){re.escape(word)}(?![\w])", text) is not None


class TopicMatcher:
    """Which texts a query (a forget's) or a topic (a mute's) touches: by keywords or by meaning (module doc)."""

    def __init__(self, query: str, embedder: Embedder | None, *, min_similarity: float, every_word: bool) -> None:
        self.query = query.strip()
        self.words = query_words(self.query)
        self.embedder = embedder
        self.min_similarity = min_similarity
        self.every_word = every_word
        self._vector: np.ndarray | None = None

    def by_words(self, text: str) -> bool:
        """Whether the text holds the query's words (all, or any: `every_word`)."""
        if not self.words:
            return False
        lowered = text.lower()
        hits = (_has_word(lowered, w) for w in self.words)
        return all(hits) if self.every_word else any(hits)

    def matches(self, texts: Sequence[str]) -> list[bool]:
        """For each text: does it touch the query (keywords, else meaning)."""
        found = [self.by_words(t) for t in texts]
        rest = [i for i, hit in enumerate(found) if not hit and texts[i].strip()]
        if rest and self.embedder is not None and self.min_similarity <= 1:
            if self._vector is None:
                self._vector = np.asarray(self.embedder.embed([self.query])[0], dtype=np.float32)
            vectors = np.asarray(self.embedder.embed([texts[i] for i in rest]), dtype=np.float32)
            scores = vectors @ self._vector
            for i, score in zip(rest, scores, strict=True):
                found[i] = bool(score >= self.min_similarity)
        return found

    def select(self, items: Sequence[T], text: Callable[[T], str]) -> list[T]:
        """The items whose text matches."""
        return [item for item, hit in zip(items, self.matches([text(i) for i in items]), strict=True) if hit]


class MutedTopics:
    """An agent's muted topics: stored, listed, and used to leave out what touches them."""

    def __init__(
        self, agent_id: int, engine: Engine, embedder: Embedder | None, clock: Callable[[], datetime] = utcnow
    ) -> None:
        self.agent_id = agent_id
        self.engine = engine
        self.embedder = embedder
        self.clock = clock
        self._matchers: dict[str, TopicMatcher] = {}

    def topics(self) -> list[str]:
        """The muted topics, oldest first (one indexed read)."""
        query = select(muted_topics.c.topic).where(muted_topics.c.agent_id == self.agent_id)
        with self.engine.connect() as conn:
            return list(conn.execute(query.order_by(muted_topics.c.created_at, muted_topics.c.topic)).scalars())

    def mute(self, topic: str) -> bool:
        """Mute a topic; False when it was muted already."""
        topic = _topic(topic)
        row = {"agent_id": self.agent_id, "topic": topic, "created_at": self.clock()}
        insert = dialect(self.engine).insert(muted_topics).values(row).on_conflict_do_nothing()
        with self.engine.begin() as conn:  # the row returned, not `rowcount`: Postgres' engine here reports -1
            inserted = conn.execute(insert.returning(muted_topics.c.topic)).first() is not None
        log.info("topic_muted", agent_id=self.agent_id, new=inserted)
        return inserted

    def unmute(self, topic: str) -> bool:
        """Unmute a topic (as written, case aside); False when it was not muted."""
        wanted = _topic(topic).lower()
        doomed = [t for t in self.topics() if t.lower() == wanted]
        if not doomed:
            return False
        with self.engine.begin() as conn:
            where = (muted_topics.c.agent_id == self.agent_id, muted_topics.c.topic.in_(doomed))
            conn.execute(delete(muted_topics).where(*where))
        log.info("topic_unmuted", agent_id=self.agent_id)
        return True

    def _matcher(self, topic: str) -> TopicMatcher:
        if topic not in self._matchers:
            self._matchers[topic] = TopicMatcher(topic, self.embedder, min_similarity=MUTE_SIMILARITY, every_word=False)
        return self._matchers[topic]

    def muted(self, texts: Sequence[str], topics: Sequence[str] | None = None) -> list[bool]:
        """For each text: does it touch a muted topic."""
        topics = self.topics() if topics is None else topics
        found = [False] * len(texts)
        for topic in topics:
            rest = [i for i, hit in enumerate(found) if not hit]
            if not rest:
                break
            for i, hit in zip(rest, self._matcher(topic).matches([texts[i] for i in rest]), strict=True):
                found[i] = hit
        return found

    def touches(self, text: str) -> bool:
        """Whether one text touches a muted topic."""
        return self.muted([text])[0]

    def drop(self, items: Iterable[T], text: Callable[[T], str] = lambda item: getattr(item, "text", "")) -> list[T]:
        """The items that touch no muted topic (all of them, and no embedding, while none is muted)."""
        items = list(items)
        topics = self.topics() if items else []
        if not topics:
            return items
        kept = [item for item, hit in zip(items, self.muted([text(i) for i in items], topics), strict=True) if not hit]
        if len(kept) < len(items):
            log.info("topics_left_out", agent_id=self.agent_id, dropped=len(items) - len(kept))
        return kept


def _topic(topic: str) -> str:
    text = " ".join(topic.split())
    if not text:
        raise ValueError("the topic is empty")
    if len(text) > MAX_TOPIC_CHARS:
        raise ValueError(f"a topic has at most {MAX_TOPIC_CHARS} characters; this one has {len(text)}")
    return text


def any_text(item: Any) -> str:
    """The text of a hit, a record or a message, for `MutedTopics.drop`."""
    return str(getattr(item, "text", None) or getattr(item, "content", None) or "")
