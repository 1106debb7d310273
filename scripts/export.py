"""Export a gptlab Lightning checkpoint as a Hugging Face directory (LlamaForCausalLM or GPT-2).

usage: python scripts/export.py ckpt_path=<run>/checkpoints/last.ckpt out_dir=<dir>
                                [tokenizer_dir=<dir holding tokenizer.json>]
"""

from __future__ import annotations

import sys

from gptlab.export.hf import export_hf, load_gpt_from_lightning_ckpt

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
            raise ValueError(
                f"argument {arg!r} is not key=value; accepted keys: {', '.join(accepted)}"
            )
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
        model = load_gpt_from_lightning_ckpt(args["ckpt_path"])
        out = export_hf(model, args["out_dir"], args.get("tokenizer_dir"))
    except (ValueError, OSError) as e:  # FileNotFoundError is an OSError
        message = " ".join(str(e).split())
        print(f"export: error: {message}", file=sys.stderr)
        return 2
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
