"""bench.embedding_survey: a model folder with prefixes is embedded with them, and queries and documents are
cached apart (the survey's LoCoMo numbers for e5-style models rest on both)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from bench.embedding_survey import SurveyEmbedder, cached, model_spec
from pagemind.runtime.memory.embedding.local_model import DEFAULT_MODEL_DIR


@pytest.fixture(scope="module")
def prefixed_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shipped MiniLM files with a survey.json that asks for e5-style prefixes."""
    folder = tmp_path_factory.mktemp("models") / "minilm-prefixed"
    folder.mkdir()
    for item in DEFAULT_MODEL_DIR.iterdir():
        (folder / item.name).symlink_to(item)
    (folder / "survey.json").write_text(
        json.dumps(
            {
                "model_id": "minilm-prefixed",
                "query_prefix": "query: ",
                "passage_prefix": "passage: ",
                "licence": "Apache-2.0",
            }
        )
    )
    return folder


def test_a_folder_without_survey_json_is_minilm_like(tmp_path: Path) -> None:
    spec = model_spec(tmp_path)
    assert (spec["pooling"], spec["query_prefix"], spec["passage_prefix"], spec["dim"]) == ("mean", "", "", 384)


def test_queries_and_documents_get_their_prefixes(prefixed_folder: Path) -> None:
    embedder = SurveyEmbedder(prefixed_folder)
    plain = SurveyEmbedder(DEFAULT_MODEL_DIR)
    text = "The user is allergic to peanuts."
    assert np.allclose(embedder.embed([text])[0], plain.embed(["passage: " + text])[0], atol=1e-5)
    assert np.allclose(embedder.embed_query(text), plain.embed(["query: " + text])[0], atol=1e-5)
    assert not np.allclose(embedder.embed_query(text), embedder.embed([text])[0], atol=1e-3)


def test_the_cache_keeps_a_query_apart_from_the_same_text_as_a_document(prefixed_folder: Path) -> None:
    embedder = cached(prefixed_folder)
    assert isinstance(embedder.inner, SurveyEmbedder)
    text = "Where did Melanie go camping?"
    document = embedder.embed([text])[0]
    query = embedder.embed_query(text)
    assert embedder.computed == 2
    assert not np.allclose(query, document, atol=1e-3)
    assert np.array_equal(embedder.embed_query(text), query) and embedder.computed == 2
