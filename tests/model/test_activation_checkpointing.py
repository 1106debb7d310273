"""model.activation_checkpointing: the same step, fewer activations kept.

Oracle: a training step written here in plain PyTorch (forward, cross-entropy, backward) on the same
weights and batch with checkpointing off. A checkpointed block must give bit-identical gradients
(its backward re-runs the very same ops on the very same input, and non-reentrant checkpointing
restores the RNG state first, so dropout draws the same masks), and telemetry, which reads the
stream from GPT.tap in the eager loop (outside the recomputed call), must log the same values.
That checkpointing really happens is seen from the recomputation itself: a checkpointed block's
forward runs twice per step (once more in backward), every other block once. The memory it saves
is measured by tests/bench/test_checkpoint_memory.py.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import lightning as L
import pytest
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader

from gptlab.config import OptimConfig
from gptlab.model import GPT, GPTConfig
from gptlab.training.callbacks.telemetry import LayerTelemetry
from gptlab.training.module import GPTLightningModule

SMALL = dict(vocab_size=64, block_size=16, n_layer=3, n_head=2, n_embd=32)


def build(mode: str, every: int = 2, dropout: float = 0.0, **kw: Any) -> GPT:
    torch.manual_seed(0)  # the same initial weights for every mode
    cfg = GPTConfig(
        **{**SMALL, **kw},
        dropout=dropout,
        activation_checkpointing=mode,
        activation_checkpointing_every=every,
    )
    return GPT(cfg)


def plain_step(model: GPT, batch: torch.Tensor, seed: int) -> dict[str, torch.Tensor]:
    """One forward + backward written out: next-token cross-entropy, gradients by name."""
    model.train()
    model.zero_grad(set_to_none=True)
    torch.manual_seed(seed)  # the dropout masks of this step
    logits = model(batch[:, :-1])
    F.cross_entropy(logits.reshape(-1, logits.size(-1)), batch[:, 1:].reshape(-1)).backward()
    return {n: p.grad.clone() for n, p in model.named_parameters()}


def batch(seed: int = 1) -> torch.Tensor:
    return torch.randint(0, 64, (4, 17), generator=torch.Generator().manual_seed(seed))


def forward_counts(model: GPT) -> list[int]:
    """Per block, how many times its forward ran (checkpointed blocks run again in backward)."""
    counts = [0] * len(model.blocks)
    for i, block in enumerate(model.blocks):
        block.register_forward_pre_hook(lambda m, a, i=i: counts.__setitem__(i, counts[i] + 1))
    return counts


@pytest.mark.parametrize(
    ("mode", "every", "n_layer", "want"),
    [
        ("none", 2, 3, [1, 1, 1]),
        ("full", 2, 3, [2, 2, 2]),
        ("selective", 2, 3, [2, 1, 2]),  # blocks 0, 2
        ("selective", 3, 4, [2, 1, 1, 2]),  # blocks 0, 3
        ("selective", 1, 2, [2, 2]),  # every block: full
    ],
)
def test_which_blocks_recompute(mode: str, every: int, n_layer: int, want: list[int]) -> None:
    model = build(mode, every, n_layer=n_layer)
    counts = forward_counts(model)
    plain_step(model, batch(), seed=3)
    assert counts == want
    # no recomputation without autograd (validation, generation): one forward per block
    counts[:] = [0] * n_layer
    with torch.no_grad():
        model(batch()[:, :-1])
    assert counts == [1] * n_layer


@pytest.mark.parametrize("dropout", [0.0, 0.1])
@pytest.mark.parametrize("mode", ["full", "selective"])
def test_gradients_equal_the_plain_step_without_checkpointing(mode: str, dropout: float) -> None:
    x = batch()
    want = plain_step(build("none", dropout=dropout), x, seed=5)
    got = plain_step(build(mode, dropout=dropout), x, seed=5)
    assert want.keys() == got.keys()
    for name, g in want.items():
        assert torch.equal(got[name], g), (mode, dropout, name, float((got[name] - g).abs().max()))
    if dropout:  # the masks matter: another seed's step has other gradients (the test can fail)
        other = plain_step(build("none", dropout=dropout), x, seed=6)
        assert not torch.equal(other["blocks.0.attn.q_proj.weight"], want["blocks.0.attn.q_proj.weight"])


def test_tap_sees_each_point_once_and_the_same_stream() -> None:
    """GPT.tap (telemetry's reader) runs once per point per step, not again in recomputation."""
    seen: dict[str, list[tuple[int, torch.Tensor]]] = {}
    for mode in ("none", "full"):
        model = build(mode)
        calls: list[tuple[int, torch.Tensor]] = []
        model.tap = lambda i, x, rope, calls=calls: calls.append((i, x.detach().clone()))
        plain_step(model, batch(), seed=5)
        seen[mode] = calls
    assert [i for i, _ in seen["full"]] == [0, 1, 2, 3]
    for (_, a), (_, b) in zip(seen["none"], seen["full"], strict=True):
        assert torch.equal(a, b)


def test_old_fsdp_key_names_the_new_one() -> None:
    from gptlab.config import FSDPConfig

    with pytest.raises(ValueError, match=r"model\.activation_checkpointing=none\|full\|selective"):
        FSDPConfig(activation_checkpointing=True)
    with pytest.raises(ValueError, match="choose one of none, full, selective"):
        GPTConfig(activation_checkpointing="attention")
    with pytest.raises(ValueError, match="activation_checkpointing_every=0 must be a positive integer"):
        GPTConfig(activation_checkpointing_every=0)


def telemetry_history(mode: str, steps: int = 3) -> list[tuple[int, dict[str, float]]]:
    """Telemetry (every step, the attention family included) of a short in-process Lightning fit."""
    L.seed_everything(0, verbose=False)
    cfg = GPTConfig(**SMALL, dropout=0.1, activation_checkpointing=mode)
    module = GPTLightningModule(
        model=dataclasses.asdict(cfg), optim=dataclasses.asdict(OptimConfig(warmup_steps=2))
    )
    telemetry = LayerTelemetry(every=1, figures=False)
    data = torch.randint(0, 64, (steps * 2, 17), generator=torch.Generator().manual_seed(0))
    trainer = L.Trainer(
        accelerator="cpu",
        max_steps=steps,
        log_every_n_steps=1,
        logger=False,
        callbacks=[telemetry],
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        limit_val_batches=0,
        num_sanity_val_steps=0,
    )
    trainer.fit(module, train_dataloaders=DataLoader(list(data), batch_size=2))
    return telemetry.history


def test_telemetry_values_unchanged() -> None:
    """Every family (gradient, weight and update norms, act_rms, attention logits and entropy,
    output logits) on every step, with dropout on: equal with and without checkpointing."""
    want, got = telemetry_history("none"), telemetry_history("full")
    assert [s for s, _ in want] == [s for s, _ in got] == [0, 1, 2]
    for (step, a), (_, b) in zip(want, got, strict=True):
        assert a.keys() == b.keys()
        for family in ("grad_norm/block_02/ffn", "act_rms/block_02", "attn_entropy/block_01"):
            assert family in a, family
        bad = {k: (a[k], b[k]) for k in a if not math.isclose(a[k], b[k], rel_tol=1e-6, abs_tol=1e-9)}
        assert not bad, (step, bad)


@pytest.mark.slow
def test_compiled_blocks_checkpoint_to_the_same_gradients() -> None:
    """compile=true compiles each block in place (strategies.compile_blocks, inductor); the
    checkpoint in GPT's eager loop then re-runs the compiled block in backward. Same gradients as
    the compiled model without checkpointing, dropout on (inductor draws its masks from the
    generator's state, which checkpointing restores), on an ordinary step and on a telemetry
    attention step, whose forward runs the `keep_qk` graph and whose recomputation (telemetry
    disarms before backward) the ordinary one."""
    from gptlab.training.strategies import compile_blocks

    torch._dynamo.reset()
    x = batch()
    grads = {}
    for mode in ("none", "full"):
        model = build(mode, dropout=0.1, n_layer=2)
        compile_blocks(model)
        steps = []
        for keep in (False, True):
            for block in model.blocks:
                block.attn.keep_qk = keep
            model.zero_grad(set_to_none=True)
            torch.manual_seed(5)
            logits = model(x[:, :-1])
            for block in model.blocks:
                block.attn.keep_qk, block.attn.kept_qk = False, None
            F.cross_entropy(logits.reshape(-1, logits.size(-1)), x[:, 1:].reshape(-1)).backward()
            steps.append({n: p.grad.clone() for n, p in model.named_parameters()})
        grads[mode] = steps
    torch._dynamo.reset()
    for step, (want, got) in enumerate(zip(grads["none"], grads["full"], strict=True)):
        for name, g in want.items():
            assert torch.equal(got[name], g), (step, name, float((got[name] - g).abs().max()))
