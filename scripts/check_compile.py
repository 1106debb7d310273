"""Check that `compile=true` works for every norm placement × FFN: compiled blocks against eager.

usage: python scripts/check_compile.py [placement=pre,post,sandwich,deepnorm] [ffn=swiglu,gelu]

For each combination: a tiny GPT (2 layers, d=32), its blocks compiled by
`gptlab.training.strategies.compile_blocks` (what `configure_model` runs for compile=true), one
forward+backward on the same batch as an eager copy with the same weights. Prints the time of the
compiled step (compilation included) and the largest loss and relative gradient differences; exits 1
if any combination fails or differs by more than 1e-4. Slow on a CPU (inductor builds C++ with gcc).
"""

from __future__ import annotations

import sys
import time

TOLERANCE = 1e-4


def main(argv: list[str]) -> int:
    from gptlab.analysis.bench import COMPILE_FFNS, PLACEMENTS, compile_parity

    choices = {"placement": list(PLACEMENTS), "ffn": list(COMPILE_FFNS)}
    for arg in argv:
        key, sep, value = arg.partition("=")
        if not sep or key not in choices:
            print(
                f"error: argument {arg!r} is not accepted; use placement=... and/or ffn=...", file=sys.stderr
            )
            return 2
        choices[key] = [v for v in value.split(",") if v]
    print(
        f"{'placement':<10} {'ffn':<8} {'compiled step s':>16} {'loss diff':>10} "
        f"{'grad rel diff':>14}  result"
    )
    failed = 0
    t0 = time.perf_counter()
    for placement in choices["placement"]:
        for ffn in choices["ffn"]:
            try:
                r = compile_parity(placement, ffn)
            except Exception as err:  # report every combination, then fail
                failed += 1
                print(
                    f"{placement:<10} {ffn:<8} {'-':>16} {'-':>10} {'-':>14}  "
                    f"FAILED: {type(err).__name__}: {err}"
                )
                continue
            ok = (
                r["loss_diff"] <= TOLERANCE
                and r["max_rel_grad_diff"] <= TOLERANCE
                and r["compiled_blocks"] == r["n_layer"]
            )
            failed += not ok
            print(
                f"{placement:<10} {ffn:<8} {r['seconds']:>16.1f} {r['loss_diff']:>10.2e} "
                f"{r['max_rel_grad_diff']:>14.2e}  {'ok' if ok else 'MISMATCH'}"
            )
    print(f"total {time.perf_counter() - t0:.0f} s; {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
