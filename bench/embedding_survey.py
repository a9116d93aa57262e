"""Embedding model survey (issue 14 item 1): speed, size and a Chinese sanity check of candidate models, each an
ONNX model folder run by fastembed the way the shipped MiniLM is (one thread, batch size 1).

    python -m bench.embedding_survey /work/models [--queries 200] [--json]
    python -m bench.retrieval_locomo --embedder /work/models/NAME --no-write      # retrieval quality of one

A model folder holds model.onnx, tokenizer.json (+ tokenizer_config.json, special_tokens_map.json, config.json) and
optionally survey.json: {"model_id", "dim", "pooling": "mean"|"cls", "query_prefix", "passage_prefix", "licence",
"source", "kind"}; "kind": "ort-string" is a graph that tokenizes itself (string in, vector out, run by onnxruntime
with onnxruntime-extensions, not by fastembed). Without survey.json a folder is taken to be MiniLM-like (mean
pooling, no prefixes). Folders are read from the directory argument; the shipped model is measured too (`shipped`
row). Nothing here changes the runtime: it is measurement only.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import LOCOMO, machine_note
from pagemind.runtime.memory.embedding.cache import CachedEmbedder
from pagemind.runtime.memory.embedding.embedders import normalise
from pagemind.runtime.memory.embedding.local_model import DEFAULT_MODEL_DIR

# Chinese paraphrase pairs (同义改写, few characters in common) and, for each, an unrelated sentence.
CHINESE = [
    ("我对花生过敏，一吃就起疹子。", "我不能碰坚果类的东西，否则皮肤会发红发痒。", "明天下午三点开会讨论预算。"),
    ("我下个月要搬到上海去工作。", "公司把我调去沪上的分部，月底就动身。", "这只猫喜欢在窗台上晒太阳。"),
    ("我女儿今年刚上小学一年级。", "孩子九月份开始读书了，现在是一年级新生。", "这家餐厅的牛排太咸了。"),
    ("最近睡眠很差，总是半夜醒来。", "这阵子失眠严重，凌晨常常醒了就睡不着。", "我们周末去爬了香山。"),
    ("我养了一只叫豆豆的小狗。", "家里有条狗狗，名字是豆豆。", "股票市场今天大幅下跌。"),
]


def model_spec(folder: Path) -> dict[str, Any]:
    """survey.json of a model folder, with MiniLM-like defaults."""
    spec = {
        "model_id": folder.name,
        "dim": 384,
        "pooling": "mean",
        "query_prefix": "",
        "passage_prefix": "",
        "licence": "?",
        "source": "?",
    }
    path = folder / "survey.json"
    return spec | (json.loads(path.read_text()) if path.exists() else {})


class SurveyEmbedder:
    """A model folder run by fastembed (registered as a custom model), with the model's query/passage prefixes."""

    def __init__(self, folder: Path, *, threads: int = 1):
        self.folder = Path(folder)
        self.spec = model_spec(self.folder)
        self.model_id = f"survey-{self.spec['model_id']}"
        self.dim = int(self.spec["dim"])
        self.query_prefix = self.spec["query_prefix"]
        self.passage_prefix = self.spec["passage_prefix"]
        self.threads = threads
        self.load_seconds = 0.0
        self._model: Any = None
        self._lock = threading.Lock()

    def _load(self) -> Any:
        with self._lock:
            if self._model is None and self.spec.get("kind") == "ort-string":
                self._model = self._load_string_model()
            if self._model is None:
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                from fastembed import TextEmbedding
                from fastembed.common.model_description import ModelSource, PoolingType

                name = f"pagemind-survey/{self.spec['model_id']}"
                if name.lower() not in {m["model"].lower() for m in TextEmbedding.list_supported_models()}:
                    pooling = PoolingType.MEAN if self.spec["pooling"] == "mean" else PoolingType.CLS
                    TextEmbedding.add_custom_model(
                        name,
                        pooling=pooling,
                        normalization=True,
                        dim=self.dim,
                        sources=ModelSource(hf=name),
                        model_file="model.onnx",
                    )
                started = time.perf_counter()
                self._model = TextEmbedding(
                    name, specific_model_path=str(self.folder), threads=self.threads, lazy_load=False
                )
                self.load_seconds = time.perf_counter() - started
        return self._model

    def _load_string_model(self) -> Any:
        """A model whose graph tokenizes too (string in, vector out; onnxruntime-extensions' SentencePiece op)."""
        import onnxruntime as ort
        from onnxruntime_extensions import get_library_path

        options = ort.SessionOptions()
        options.intra_op_num_threads = options.inter_op_num_threads = self.threads
        options.register_custom_ops_library(get_library_path())
        started = time.perf_counter()
        session = ort.InferenceSession(str(self.folder / "model.onnx"), options, providers=["CPUExecutionProvider"])
        self.load_seconds = time.perf_counter() - started
        return session

    def _run(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        model = self._load()
        if self.spec.get("kind") == "ort-string":
            return normalise(np.vstack([model.run(None, {"inputs": [t]})[0] for t in texts]))
        return normalise(np.vstack(list(model.embed(list(texts), batch_size=1))))

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Documents (memories, messages): with the passage prefix."""
        return self._run([self.passage_prefix + t for t in texts])

    def embed_query(self, text: str) -> np.ndarray:
        """One search query: with the query prefix."""
        return self._run([self.query_prefix + text])[0]


def cached(folder: str | Path, engine: Any = None) -> CachedEmbedder:
    """The cached survey embedder of a model folder (what `bench.retrieval_locomo --embedder DIR` uses); the runtime's
    cache keeps a prefixed model's queries apart from documents."""
    return CachedEmbedder(SurveyEmbedder(Path(folder)), engine)


def folder_size(folder: Path) -> int:
    """Bytes on disk of the files a model needs (model.onnx and the tokenizer/config files)."""
    return sum(p.stat().st_size for p in folder.iterdir() if p.is_file() and p.suffix in (".onnx", ".json", ".txt"))


def questions(limit: int) -> list[str]:
    """Distinct LoCoMo dev questions (realistic query lengths), else synthetic ones."""
    path = LOCOMO
    found: list[str] = []
    if path.exists():
        found = list(dict.fromkeys(q["question"] for s in json.loads(path.read_text()) for q in s["qa"]))
    return (found or [f"what did the user say about topic number {i}?" for i in range(limit)])[:limit]


def chinese_check(embedder: SurveyEmbedder) -> dict[str, float]:
    """Mean cosine of the paraphrase pairs and of the unrelated pairs, and how many pairs rank right."""
    para, other = [], []
    for a, b, c in CHINESE:
        va, vb, vc = embedder.embed([a, b, c])
        para.append(float(va @ vb))
        other.append(float(va @ vc))
    return {
        "zh_paraphrase": round(statistics.mean(para), 3),
        "zh_unrelated": round(statistics.mean(other), 3),
        "zh_right": sum(p > o for p, o in zip(para, other, strict=True)),
    }


def measure(folders: list[Path], n_queries: int) -> list[dict[str, Any]]:
    """Per model: load time, ms per single query embedding (median and p90 of n_queries), size, the Chinese check.
    The models take turns query by query, so a busy machine slows them alike and the ratios stay fair."""
    embedders = [SurveyEmbedder(folder) for folder in folders]
    for embedder in embedders:
        embedder.embed_query("warm up")
    times: list[list[float]] = [[] for _ in embedders]
    cpu: list[list[float]] = [[] for _ in embedders]  # CPU time: what an idle machine's wall time would be
    for text in questions(n_queries):
        for embedder, spent, used in zip(embedders, times, cpu, strict=True):
            started, started_cpu = time.perf_counter(), time.process_time()
            embedder.embed_query(text)
            spent.append((time.perf_counter() - started) * 1000)
            used.append((time.process_time() - started_cpu) * 1000)
    rows = []
    for folder, embedder, spent, used in zip(folders, embedders, times, cpu, strict=True):
        spent.sort()
        rows.append(
            {
                "model": embedder.spec["model_id"],
                "folder": str(folder),
                "licence": embedder.spec["licence"],
                "source": embedder.spec["source"],
                "size_mb": round(folder_size(folder) / 1e6, 1),
                "load_s": round(embedder.load_seconds, 2),
                "ms_median": round(statistics.median(spent), 2),
                "ms_p90": round(spent[int(0.9 * (len(spent) - 1))], 2),
                "cpu_ms_median": round(statistics.median(used), 2),
                "n": len(spent),
            }
            | chinese_check(embedder)
        )
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    """The measurements as a markdown table."""
    lines = [
        "| model | licence | size MB | load s | ms/query p50 (p90) | CPU ms/query p50 "
        "| zh paraphrase / unrelated cos (right) |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        lines.append(
            f"| {r['model']} | {r['licence']} | {r['size_mb']} | {r['load_s']} | {r['ms_median']} "
            f"({r['ms_p90']}) | {r['cpu_ms_median']} | {r['zh_paraphrase']} / {r['zh_unrelated']} "
            f"({r['zh_right']}/{len(CHINESE)}) |"
        )
    return "\n".join(lines)


def main() -> None:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("models", type=Path, help="a folder of model folders (each with model.onnx)")
    parser.add_argument("--queries", type=int, default=200, help="single-query embeddings timed per model")
    parser.add_argument("--no-shipped", action="store_true", help="skip the shipped MiniLM")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON too")
    args = parser.parse_args()
    folders = [] if args.no_shipped else [DEFAULT_MODEL_DIR]
    folders += sorted(p for p in args.models.iterdir() if (p / "model.onnx").exists())
    rows = measure(folders, args.queries)
    for row in rows:
        if row["folder"] == str(DEFAULT_MODEL_DIR):
            row |= {"model": "shipped all-MiniLM-L6-v2 int8", "licence": "Apache-2.0", "source": "runtime/data/models"}
    print(machine_note() + "\n\n" + table(rows))
    if args.json:
        print(json.dumps(rows))


if __name__ == "__main__":
    main()
