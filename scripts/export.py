"""Export a gptlab checkpoint as a Hugging Face directory (LlamaForCausalLM or GPT2LMHeadModel).

usage: python scripts/export.py ckpt_path=<run>/checkpoints/last.ckpt out_dir=<dir>
                                [tokenizer_dir=<dir holding tokenizer.json>]

ckpt_path: a Lightning .ckpt or a consolidated file. The tokenizer the run trained with (recorded in
the checkpoint) is shipped as tokenizer.json; tokenizer_dir overrides it with another one.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from gptlab.checkpoints import load_checkpoint, write_tokenizer
from gptlab.export.hf import export_hf

USAGE = (
    "usage: python scripts/export.py ckpt_path=<lightning .ckpt> out_dir=<dir> "
    "[tokenizer_dir=<dir holding tokenizer.json>]"
)
REQUIRED = ("ckpt_path", "out_dir")
OPTIONAL = ("tokenizer_dir",)


def parse_args(argv: list[str]) -> dict[str, str]:
    """key=value arguments, Hydra-style, so the command reads like the training one."""
    accepted = REQUIRED + OPTIONAL
    args: dict[str, str] = {}
    for arg in argv:
        key, sep, value = arg.lstrip("-").partition("=")
        if not sep:
            raise ValueError(f"argument {arg!r} is not key=value; accepted keys: {', '.join(accepted)}")
        if key not in accepted:
            raise ValueError(f"unknown argument {key!r}; accepted keys: {', '.join(accepted)}")
        if key in args:
            raise ValueError(f"argument {key!r} given twice")
        if not value:
            raise ValueError(f"argument {key!r} is empty")
        args[key] = value
    missing = [k for k in REQUIRED if k not in args]
    if missing:
        raise ValueError(f"missing required argument(s) {', '.join(missing)}; {USAGE}")
    return args


def main(argv: list[str] | None = None) -> int:
    """Run the export; any error becomes one line on stderr and exit code 2."""
    argv = sys.argv[1:] if argv is None else argv
    if any(a in ("-h", "--help", "help") for a in argv):
        print(USAGE)
        return 0
    try:
        args = parse_args(argv)
        model, spec = load_checkpoint(args["ckpt_path"])
        with tempfile.TemporaryDirectory() as tmp:
            tokenizer_dir = args.get("tokenizer_dir") or write_tokenizer(spec, Path(tmp)).parent
            out = export_hf(model, args["out_dir"], tokenizer_dir)
    except (ValueError, OSError) as e:  # FileNotFoundError is an OSError
        message = " ".join(str(e).split())
        print(f"export: error: {message}", file=sys.stderr)
        return 2
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
