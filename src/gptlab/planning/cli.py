"""scripts/plan.py's work: read the options, compose the config as train.py does, plan, print."""

from __future__ import annotations

import logging
from collections.abc import Sequence


def main(argv: Sequence[str]) -> int:
    """Plan the run the overrides describe on plan.gpu; bad input exits 2 in one line."""
    from gptlab.heap import imports_unscanned

    with imports_unscanned():  # torch's and Hydra's objects: never walked by the collector again
        import torch

        from gptlab.compose import compose_config
        from gptlab.errors import USER_ERRORS, exit_with
        from gptlab.planning.options import parse_args, setup_from
        from gptlab.planning.plan import alternatives, fits_nowhere, fsdp_refusal, largest_micro_batch, plan
        from gptlab.planning.report import format_alternatives, format_plan, gib

    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    torch.set_num_threads(1)  # fake tensors do no arithmetic: threads only add overhead
    argv = list(argv)
    if "--table" in argv:
        from gptlab.planning.table import main as table_main

        return table_main([a for a in argv if a != "--table"])
    try:
        opts, overrides = parse_args(argv)
        gpu = opts.the_gpu()
        cfg = compose_config(overrides)
        setup = setup_from(cfg)
        p = plan(setup, gpu, opts.mfu, opts.headroom)
        nowhere = fits_nowhere(p, opts.headroom)
        if nowhere is not None:
            raise ValueError(nowhere)
    except USER_ERRORS as err:
        exit_with(err)
    print("plan: python scripts/plan.py " + " ".join(argv))
    if cfg.compile:
        print("note: compile=true is planned eager (compiled blocks usually hold less activation memory)")
    print(format_plan(p, opts.tokens))
    if not p.fits:
        print()
        print(format_alternatives(alternatives(p, opts.mfu, opts.headroom), fsdp_refusal(setup)))
    elif opts.search:
        best = largest_micro_batch(setup, gpu, opts.mfu, opts.headroom)
        if best is not None:
            print(
                f"largest micro-batch that fits: {best.setup.micro_batch} (peak {gib(best.memory.peak)}, "
                f"measured): data.batch_size={best.setup.micro_batch}"
            )
    return 0
