"""Run the sections in order inside the budget; a failure or a timeout is recorded, then the next."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import tempfile
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gptlab.bench.gpu_check.report import table, write
from gptlab.bench.gpu_check.shapes import DRY, FULL, Shapes
from gptlab.errors import exit_with

MIN_SECTION = 5.0  # seconds: a section given less is skipped


class SectionTimeout(Exception):
    pass


def _alarm(signum: int, frame: Any) -> None:
    raise SectionTimeout("time limit reached")


def run_sections(shapes: Shapes, only: Sequence[str], workdir: Path) -> dict[str, Any]:
    from gptlab.bench.gpu_check.probes import compile_backend
    from gptlab.bench.gpu_check.sections import SECTIONS, Context, with_graphs

    ctx = Context(shapes, workdir)
    start = time.monotonic()
    results: dict[str, Any] = {}
    previous = signal.signal(signal.SIGALRM, _alarm)
    try:
        for name, fn in SECTIONS.items():
            if only and name not in only:
                continue
            left = shapes.budget - (time.monotonic() - start)
            limit = min(shapes.limits[name], left)
            if limit < MIN_SECTION:
                results[name] = {"status": "skipped", "error": f"{left:.0f} s of the budget left"}
                continue
            t0 = time.monotonic()
            signal.alarm(max(1, int(limit)))
            try:
                with compile_backend(shapes.backend):
                    results[name] = {"status": "ok", **with_graphs(fn, ctx)}
            except SectionTimeout:
                results[name] = {"status": "timeout", "error": f"over its {limit:.0f} s"}
            except Exception as err:  # recorded; the next section runs
                traceback.print_exc()
                results[name] = {"status": "failed", "error": f"{type(err).__name__}: {err}"[:300]}
            finally:
                signal.alarm(0)
            results[name]["seconds"] = time.monotonic() - t0
            logging.getLogger("gptlab").info("gpu_check: %s %s", name, results[name]["status"])
    finally:
        signal.signal(signal.SIGALRM, previous)
    return {"sections": results, "seconds": time.monotonic() - start}


def main(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m gptlab.bench.gpu_check", description=__doc__)
    p.add_argument("--dry-run", action="store_true", help="tiny shapes on a CPU (the suite's test)")
    p.add_argument(
        "--out", default=os.environ.get("OUT", "gpu_check_out"), help="where the JSON and table go"
    )
    p.add_argument("--only", default="", help="comma-separated sections (default: all, in order)")
    p.add_argument("--budget", type=float, default=None, help="seconds for all sections")
    args = p.parse_args(argv)
    from gptlab.bench.gpu_check.sections import SECTIONS

    only = [s for s in args.only.split(",") if s]
    unknown = [s for s in only if s not in SECTIONS]
    if unknown:
        exit_with(ValueError(f"--only={args.only!r} names {unknown}; accepted: {', '.join(SECTIONS)}"))
    shapes = DRY if args.dry_run else FULL
    if args.budget is not None:
        shapes = Shapes(**{**shapes.__dict__, "budget": args.budget})
    os.environ.setdefault("WANDB_MODE", "disabled")  # logger=csv: wandb is never imported either
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    logging.getLogger("gptlab").setLevel(logging.INFO)
    if not args.dry_run:
        import torch

        if not torch.cuda.is_available():
            exit_with(ValueError("no CUDA device: the check needs one GPU; on a CPU use --dry-run"))
    with tempfile.TemporaryDirectory(prefix="gptlab-gpu-check-") as tmp:
        result = run_sections(shapes, only, Path(tmp))
    result = {"mode": "dry-run" if args.dry_run else "gpu", "budget": shapes.budget, **result}
    write(result, Path(args.out))
    print(table(result))
    return 0
