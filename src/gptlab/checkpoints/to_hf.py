"""A checkpoint of any form written as a HF directory, shipping the tokenizer it trained with."""

from __future__ import annotations

import tempfile
from pathlib import Path

from gptlab.checkpoints.load import load_checkpoint
from gptlab.data.spec import write_tokenizer
from gptlab.export import export_hf

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


def export_checkpoint(ckpt_path: str, out_dir: str, tokenizer_dir: str | None = None) -> str:
    """Export the checkpoint's GPT to `out_dir`, with `tokenizer_dir`'s tokenizer or its own."""
    model, spec = load_checkpoint(ckpt_path)
    with tempfile.TemporaryDirectory() as tmp:
        tokenizer = tokenizer_dir or write_tokenizer(spec, Path(tmp)).parent
        return export_hf(model, out_dir, tokenizer)
