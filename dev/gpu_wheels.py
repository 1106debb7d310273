"""`make gpu-wheels`: the wheels the lent GPU image lacks, pinned to this venv's versions, into .whl/.

The lent machine reaches no package registry. Its image (the device tool's KINDS.md) has torch
2.11, lightning 2.6.6, pyarrow, pandas, fsspec, huggingface-hub, xxhash, numpy, scipy, matplotlib,
tiktoken and tokenizers, and lacks what `python -m gptlab.bench.gpu_check` imports beyond them:
MISSING below. wandb is not carried (tens of MiB, platform-specific): the check logs to CSV, sets
WANDB_MODE=disabled and never imports it. antlr4-python3-runtime 4.9.3 is published as a source
archive only: pip builds its pure-Python wheel here. Usage:

    python dev/gpu_wheels.py [--dest .whl] [--python-version 3.12]

and on the device: `python3 -m pip install -q --no-index --no-deps --no-compile
--target /tmp/gptlab/site-packages .whl/*.whl` (scripts/gpu_check.sh does it).
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import subprocess
import sys
from pathlib import Path

MISSING = ("hydra-core", "omegaconf", "antlr4-python3-runtime", "datasets", "dill", "multiprocess")
SOURCE_ONLY = ("antlr4-python3-runtime",)  # no wheel on PyPI: built here (pure Python)
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64",
             "manylinux2014_x86_64", "manylinux1_x86_64")  # fmt: skip
# the lent image's Python packages (KINDS.md, "Python packages already there", read 2026-11-17) that a
# gptlab run can import: the wheel-set test builds a venv of these (from this venv) plus the wheels
IMAGE = ("aiohappyeyeballs", "aiohttp", "aiosignal", "annotated-doc", "anyio", "attrs", "certifi",
         "charset-normalizer", "click", "cloudpickle", "contourpy", "cycler", "filelock", "fonttools",
         "frozenlist", "fsspec", "h11", "hf-xet", "httpcore", "httpx", "huggingface-hub", "idna",
         "jinja2", "kiwisolver", "lightning", "lightning-utilities", "markupsafe", "matplotlib",
         "mpmath", "multidict", "networkx", "numpy", "packaging", "pandas", "pillow", "propcache",
         "psutil", "pyarrow", "pyparsing", "python-dateutil", "pytorch-lightning", "pyyaml", "regex",
         "requests", "rich", "safetensors", "scipy", "shellingham", "six", "sympy", "tiktoken",
         "tokenizers", "torch", "torchmetrics", "tqdm", "transformers", "typer", "typing-extensions",
         "urllib3", "xxhash", "yarl", "markdown-it-py", "mdurl", "pygments")  # fmt: skip
LIMIT = 64 * 2**20  # what travels with a device call, the tree included


def pins() -> list[str]:
    """NAME==VERSION of each missing package, at the version this venv runs (tested together)."""
    return [f"{name}=={md.version(name)}" for name in MISSING]


def download(dest: Path, python_version: str = "3.12") -> list[Path]:
    """Fetch the pinned wheels for CPython `python_version` on manylinux x86_64; returns the files."""
    dest.mkdir(parents=True, exist_ok=True)
    pip = [sys.executable, "-m", "pip", "-q"]
    binary = [p for p in pins() if p.split("==")[0] not in SOURCE_ONLY]
    flags = ["--no-deps", "--only-binary=:all:", "--implementation", "cp", "--python-version", python_version]
    for platform in PLATFORMS:
        flags += ["--platform", platform]
    subprocess.run([*pip, "download", *flags, "-d", str(dest), *binary], check=True)
    built = [p for p in pins() if p.split("==")[0] in SOURCE_ONLY]
    subprocess.run([*pip, "wheel", "--no-deps", "-w", str(dest), *built], check=True)
    wheels = sorted(dest.glob("*.whl"))
    names = {w.name.split("-")[0].lower().replace("_", "-") for w in wheels}
    lacking = [m for m in MISSING if m.replace("_", "-") not in names]
    if lacking:
        raise SystemExit(f"no wheel came for {lacking} in {dest}")
    total = sum(w.stat().st_size for w in wheels)
    if total > LIMIT // 2:
        raise SystemExit(f"{dest} holds {total / 2**20:.1f} MiB of wheels; keep it well under 64 MiB")
    return wheels


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dest", default=".whl")
    p.add_argument("--python-version", default="3.12", help="the lent image's CPython (3.12)")
    args = p.parse_args(argv)
    wheels = download(Path(args.dest), args.python_version)
    for w in wheels:
        print(f"{w.stat().st_size / 2**20:6.2f} MiB  {w.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
