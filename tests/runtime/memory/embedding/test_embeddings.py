"""Embeddings: the shipped model offline, the OpenAI-compatible endpoint, the cache; keyword analysis; dating."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from datetime import UTC, datetime
from pathlib import Path

import httpx
import numpy as np
import respx

from pagemind.runtime.memory.embedding.cache import CachedEmbedder, text_hash
from pagemind.runtime.memory.embedding.configured import build_embedder
from pagemind.runtime.memory.embedding.endpoint import OpenAIEmbedder
from pagemind.runtime.memory.embedding.local_model import DEFAULT_MODEL_DIR
from pagemind.runtime.memory.retrieval.dating import absolute_dates
from pagemind.runtime.memory.retrieval.keywords import analysed, query_terms, terms
from pagemind.runtime.process.settings import Settings
from pagemind.runtime.state.engine import make_engine
from pagemind.runtime.testing.embedder import FakeEmbedder

ROOT = Path(__file__).parents[4]

OFFLINE = """
import json, socket
def refuse(*args, **kwargs):
    raise OSError("network disabled by the test")
socket.socket.connect = refuse
socket.socket.connect_ex = refuse
socket.create_connection = refuse
socket.getaddrinfo = refuse
from pagemind.runtime.memory.embedding.local_model import FastEmbedEmbedder
embedder = FastEmbedEmbedder()
[reference] = embedder.embed(["The user is allergic to peanuts."])
vectors = embedder.embed(["The user is allergic to peanuts.", "Lin is allergic to peanuts",
                          "The stock market fell sharply today"])
print(json.dumps({"shape": list(vectors.shape), "head": reference[:6].round(4).tolist(),
                  "same_alone_or_batched": bool((reference == vectors[0]).all()),
                  "norms": [round(float((v * v).sum()) ** 0.5, 4) for v in vectors],
                  "close": float(vectors[0] @ vectors[1]), "far": float(vectors[0] @ vectors[2])}))
"""


def test_the_default_model_loads_and_embeds_with_the_network_unavailable(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "FASTEMBED"))}
    env.update(
        {
            "HF_HUB_OFFLINE": "1",
            "HOME": str(tmp_path),
            "FASTEMBED_CACHE_PATH": str(tmp_path / "cache"),
            "PAGEMIND_LOG_LEVEL": "ERROR",
        }
    )
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(OFFLINE)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout.strip().splitlines()[-1])
    assert data["shape"] == [3, 384] and data["norms"] == [1.0, 1.0, 1.0] and data["same_alone_or_batched"]
    reference = [-0.0029, 0.0231, -0.0015, 0.001, -0.0231, -0.0063]  # the int8 model's, from shared/data/README.md
    assert np.allclose(data["head"], reference, atol=0.002)
    assert data["close"] > 0.6 and data["far"] < 0.3
    assert not [p for p in (tmp_path / "cache").rglob("*") if p.is_file()]  # nothing downloaded or unpacked


def test_the_model_ships_inside_the_package():
    assert (DEFAULT_MODEL_DIR / "model.onnx").stat().st_size > 20_000_000
    assert {"tokenizer.json", "config.json", "vocab.txt"} <= {p.name for p in DEFAULT_MODEL_DIR.iterdir()}


def test_the_same_text_is_never_embedded_twice(tmp_path):
    engine = make_engine(f"sqlite:///{tmp_path / 'cache.db'}")
    inner = FakeEmbedder()
    cached = CachedEmbedder(inner, engine)
    first = cached.embed(["a", "bb", "a"])
    again = cached.embed(["bb", "ccc"])
    assert inner.texts == ["a", "bb", "ccc"] and cached.computed == 3
    assert np.array_equal(first[0], first[2]) and np.array_equal(first[1], again[0])
    fresh_inner = FakeEmbedder()  # a new process: the SQL cache answers, keyed by model and text hash
    assert np.array_equal(CachedEmbedder(fresh_inner, engine).embed(["ccc", "a"]), np.vstack([again[1], first[0]]))
    assert fresh_inner.texts == []
    other_model = FakeEmbedder(model_id="another-model")
    CachedEmbedder(other_model, engine).embed(["a"])
    assert other_model.texts == ["a"] and len(text_hash("a")) == 64


def test_openai_compatible_endpoint_batches_and_normalises():
    requests = []

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        requests.append(body)
        data = [
            {"object": "embedding", "index": i, "embedding": [3.0, 4.0, float(len(text))]}
            for i, text in enumerate(body["input"])
        ]
        return httpx.Response(
            200,
            json={
                "object": "list",
                "data": data[::-1],
                "model": body["model"],
                "usage": {"prompt_tokens": 1, "total_tokens": 1},
            },
        )

    with respx.mock(base_url="http://embeddings.test/v1") as router:
        router.post("/embeddings").mock(side_effect=handler)
        embedder = OpenAIEmbedder("nomic-embed-text", base_url="http://embeddings.test/v1", api_key="k", batch_size=2)
        vectors = embedder.embed(["a", "bb", "ccc", "dddd", "e"])
    assert [r["input"] for r in requests] == [["a", "bb"], ["ccc", "dddd"], ["e"]]
    assert requests[0]["model"] == "nomic-embed-text" and vectors.shape == (5, 3)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1) and vectors[2][2] > vectors[0][2]  # order kept


def test_settings_choose_the_endpoint_or_the_shipped_model(tmp_path):
    env = {
        "PAGEMIND_HOME": str(tmp_path),
        "PAGEMIND_EMBEDDING_MODEL": "text-embedding-3-small",
        "PAGEMIND_EMBEDDING_BASE_URL": "http://embeddings.test/v1",
        "PAGEMIND_EMBEDDING_DIM": "1536",
        "OPENAI_API_KEY": "sk-x",
    }
    remote = build_embedder(Settings.from_env(env))
    assert remote.model_id == "openai-text-embedding-3-small" and remote.dim == 1536
    local = build_embedder(Settings.from_env({"PAGEMIND_HOME": str(tmp_path)}))
    assert local.model_id == "all-MiniLM-L6-v2-int8" and local.dim == 384


def test_keyword_terms_stem_drop_stop_words_and_split_cjk():
    assert terms("Caroline's support groups were RUNNING!") == ["carolin", "support", "group", "run"]
    assert terms("我喜欢绿茶") == ["我喜", "喜欢", "欢绿", "绿茶"]
    assert query_terms("tea, more tea") == ["tea"] and analysed("the and of") == ""


def test_absolute_dates_cover_the_usual_phrases():
    at = datetime(2026, 11, 29, 15, tzinfo=UTC)  # a Sunday
    assert (
        absolute_dates("3 days ago and two weeks ago", at)
        == "3 days ago (2026-11-26) and two weeks ago (week of 2026-11-09)"
    )
    assert (
        absolute_dates("last Friday, next Monday, tomorrow", at)
        == "last Friday (2026-11-27), next Monday (2026-11-30), tomorrow (2026-11-30)"
    )
    assert absolute_dates("this month and last year", at) == "this month (November 2026) and last year (2025)"
    assert absolute_dates("no relative time here", at) == "no relative time here"


def test_absolute_dates_leave_a_phrase_past_the_calendar_alone():
    at = datetime(2026, 11, 29, 15, tzinfo=UTC)
    assert (
        absolute_dates("99999999 days ago, 3000 years ago, 2 days ago", at)
        == "99999999 days ago, 3000 years ago, 2 days ago (2026-11-27)"
    )
