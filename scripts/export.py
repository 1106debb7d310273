"""Export a gptlab checkpoint as a Hugging Face directory (Llama, GPT-2; MoE: OLMoE, Mixtral, Qwen3-MoE).

usage: python scripts/export.py ckpt_path=<run>/checkpoints/last.ckpt out_dir=<dir>
                                [tokenizer_dir=<dir holding tokenizer.json>]

ckpt_path: a Lightning .ckpt or a consolidated file. The tokenizer the run trained with (recorded in
the checkpoint) is shipped as tokenizer.json; tokenizer_dir overrides it with another one.
"""

from __future__ import annotations

import sys

from gptlab.heap import imports_unscanned

with imports_unscanned():  # torch's objects: never walked by the collector again
    from gptlab.checkpoints.to_hf import USAGE, export_checkpoint, parse_args


def main(argv: list[str] | None = None) -> int:
    """Run the export; any error becomes one line on stderr and exit code 2."""
    argv = sys.argv[1:] if argv is None else argv
    if any(a in ("-h", "--help", "help") for a in argv):
        print(USAGE)
        return 0
    try:
        out = export_checkpoint(**parse_args(argv))
    except (ValueError, OSError) as e:  # FileNotFoundError is an OSError
        message = " ".join(str(e).split())
        print(f"export: error: {message}", file=sys.stderr)
        return 2
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
