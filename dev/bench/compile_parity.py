"""Does `compile=true` compute what eager does? Compiled blocks against eager, per placement × FFN.

For each combination a tiny GPT (2 layers, d=32) gets its blocks compiled by
`gptlab.training.strategies.compile_blocks` (what `configure_model` runs for compile=true) and takes
one forward+backward on the same batch as an eager copy with the same weights.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F

from gptlab.model import GPT, GPTConfig
from gptlab.model.config import PLACEMENTS

COMPILE_FFNS = ("swiglu", "gelu")
TOLERANCE = 1e-4  # on the loss difference and the largest relative gradient difference


def compile_parity(placement: str, ffn: str, seed: int = 0, **model: Any) -> dict[str, float]:
    """One forward+backward of a tiny GPT with its blocks and loss compiled (`compile_blocks` and
    `training.loss.loss_fn`, what `compile=true` runs) against the same GPT eager with torch's
    cross-entropy: seconds, and the largest loss/grad differences (fp32: 1e-4 is ~1000× fp32's
    rounding at these sums, far under any real error)."""
    from gptlab.training.loss import loss_fn
    from gptlab.training.strategies import compile_blocks

    shape = {"n_layer": 2, "n_embd": 32, "n_head": 2, "block_size": 16, "vocab_size": 64, **model}
    extra = {"depth_scaled_init": "none"} if placement == "deepnorm" else {}  # as its preset: β instead
    cfg = GPTConfig.from_dict({**shape, **extra, "norm_placement": placement, "ffn": ffn})
    torch.manual_seed(seed)
    eager = GPT(cfg)
    compiled = GPT(cfg)
    compiled.load_state_dict(eager.state_dict())
    compile_blocks(compiled)
    idx = torch.randint(
        0, cfg.vocab_size, (2, cfg.block_size + 1), generator=torch.Generator().manual_seed(seed)
    )

    def step(model: GPT, compiled_loss: bool) -> torch.Tensor:
        logits = model(idx[:, :-1])
        if compiled_loss:  # what compile=true trains on: the loss compiled too (training.loss)
            loss, _ = loss_fn(True)(logits, idx[:, 1:], 0.0)
        else:  # the oracle: plain torch cross-entropy, eager
            loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), idx[:, 1:].reshape(-1))
        loss.backward()
        return loss.detach()

    ref = step(eager, False)
    t0 = time.perf_counter()
    got = step(compiled, True)
    seconds = time.perf_counter() - t0
    grads = dict(eager.named_parameters())
    grad_diff = max(
        float((p.grad - grads[n].grad).abs().max() / (grads[n].grad.abs().max() + 1e-12))
        for n, p in compiled.named_parameters()
    )
    compiled_blocks = sum(getattr(b, "_compiled_call_impl", None) is not None for b in compiled.blocks)
    return {
        "seconds": seconds,
        "loss_diff": float((got - ref).abs()),
        "max_rel_grad_diff": grad_diff,
        "compiled_blocks": float(compiled_blocks),
        "n_layer": float(cfg.n_layer),
    }


def _row(placement: str, ffn: str) -> tuple[bool, str]:
    """(passed, the printed line) for one combination; a failure to compile is a row too."""
    try:
        r = compile_parity(placement, ffn)
    except Exception as err:  # report every combination, then fail
        return (
            False,
            f"{placement:<10} {ffn:<8} {'-':>16} {'-':>10} {'-':>14}  FAILED: {type(err).__name__}: {err}",
        )
    ok = (
        r["loss_diff"] <= TOLERANCE
        and r["max_rel_grad_diff"] <= TOLERANCE
        and r["compiled_blocks"] == r["n_layer"]
    )
    return ok, (
        f"{placement:<10} {ffn:<8} {r['seconds']:>16.1f} {r['loss_diff']:>10.2e} "
        f"{r['max_rel_grad_diff']:>14.2e}  {'ok' if ok else 'MISMATCH'}"
    )


def main(argv: Sequence[str]) -> int:
    """dev/bench/compile_parity.py: `placement=` and `ffn=` comma lists (default: all); prints a table,
    returns 1 if any combination fails or differs by more than TOLERANCE, 2 on a bad argument."""
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
            ok, line = _row(placement, ffn)
            failed += not ok
            print(line)
    print(f"total {time.perf_counter() - t0:.0f} s; {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
