"""dev/bench/checkpoint_memory.py: the activation memory activation checkpointing saves, on real tensors.

Oracle (shares nothing with the tracker): the bytes autograd saves for backward inside each block,
counted here with `saved_tensors_hooks` on a model without checkpointing (distinct storages,
parameters excluded). A checkpointed block keeps only its input instead, so at the end of the
forward (where a step's activations peak) `selective` must hold exactly Σ over its checkpointed
blocks of (saved bytes − input bytes) less than `none`, and `full` at least all of that saving but
one block's (backward rebuilds one block at a time).
"""

from __future__ import annotations

import re

import pytest
import torch
import torch.nn.functional as F

from dev.bench import checkpoint_memory
from gptlab.model import GPT, GPTConfig

# blocks 0 and 2 checkpointed, the last one not: backward frees block 3's activations before it rebuilds
# any block, so the step's activation peak is at the end of the forward for every mode but full
CFG = GPTConfig(n_layer=4, n_embd=32, n_head=2, block_size=32, activation_checkpointing_every=2)
BATCH = 4

TINY = ["model.n_layer=2", "model.n_embd=32", "model.n_head=2", "model.block_size=32", "data.batch_size=2"]


def saved_bytes_per_block(cfg: GPTConfig, batch_size: int) -> list[int]:
    torch.manual_seed(0)
    model = GPT(cfg)
    own = {t.untyped_storage().data_ptr() for t in [*model.parameters(), *model.buffers()]}
    current: list[int | None] = [None]
    saved: dict[int, dict[int, int]] = {i: {} for i in range(cfg.n_layer)}
    for i, block in enumerate(model.blocks):
        block.register_forward_pre_hook(lambda m, a, i=i: current.__setitem__(0, i))
        block.register_forward_hook(lambda m, a, o: current.__setitem__(0, None))

    def pack(t: torch.Tensor) -> torch.Tensor:
        ptr = t.untyped_storage().data_ptr()
        if current[0] is not None and ptr not in own:
            saved[current[0]][ptr] = t.untyped_storage().nbytes()
        return t

    x = torch.randint(0, cfg.vocab_size, (batch_size, cfg.block_size + 1))
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        logits = model(x[:, :-1])
        F.cross_entropy(logits.reshape(-1, logits.size(-1)), x[:, 1:].reshape(-1))
    return [sum(saved[i].values()) for i in range(cfg.n_layer)]


@pytest.mark.slow
def test_memtracker_saving_matches_the_saved_tensor_bytes() -> None:
    peaks = checkpoint_memory.compare(CFG, BATCH)
    act = {mode: p["activations"] for mode, p in peaks.items()}
    input_bytes = BATCH * CFG.block_size * CFG.n_embd * 4  # a block's fp32 input, kept by checkpoint
    per_block = [b - input_bytes for b in saved_bytes_per_block(CFG, BATCH)]
    assert min(per_block) > 10 * input_bytes  # a block keeps many tensors of its input's size
    selective = sum(s for i, s in enumerate(per_block) if i % CFG.activation_checkpointing_every == 0)
    assert act["none"] - act["selective"] == pytest.approx(selective, rel=0.01), (act, per_block)
    assert act["none"] - act["full"] >= sum(per_block) - max(per_block), (act, per_block)
    assert act["full"] < act["selective"] < act["none"]
    # the rest of the step is the same memory
    for kind in ("parameters", "optimizer"):
        assert peaks["full"][kind] == peaks["selective"][kind] == peaks["none"][kind], kind


def test_script_prints_one_row_per_mode(capsys: pytest.CaptureFixture[str]) -> None:
    """The documented command's entry point (dev/bench/checkpoint_memory.py → main) at a tiny size."""
    assert checkpoint_memory.main(TINY) == 0
    out = capsys.readouterr().out
    rows = dict(re.findall(r"^\| (none|full|selective) \|.*\| ([0-9.]+) \|$", out, re.M))
    assert set(rows) == {"none", "full", "selective"}, out
    assert float(rows["none"]) == 1.0 and float(rows["full"]) < float(rows["selective"]) < 1.0, out


def test_bad_override_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        checkpoint_memory.main(["model.activation_checkpointing=all"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "none, full, selective" in err, err


def test_rounds_time_every_mode_beside_the_planners_factor(capsys: pytest.CaptureFixture[str]) -> None:
    """`--rounds 2`: two timed steps per mode, and the planner's factor written out by hand: full
    recomputes every block's forward (+1/3), selective every 2nd of 2 blocks (+1/6), none nothing.
    (The measured ratios are printed, not asserted: wall time on a shared machine is no test.)"""
    assert checkpoint_memory.main(["--rounds", "2", *TINY]) == 0
    out = capsys.readouterr().out
    rows = re.findall(r"^\| (none|full|selective) \| ([0-9.]+) \| ([0-9.]+) \| ([0-9.]+) \|$", out, re.M)
    assert [r[0] for r in rows] == ["none", "full", "selective"], out
    factors = {mode: float(f) for mode, _, _, f in rows}
    assert factors == {
        "none": 1.0,
        "full": pytest.approx(4 / 3, abs=5e-3),
        "selective": pytest.approx(7 / 6, abs=5e-3),
    }
    assert float(rows[0][2]) == 1.0 and all(float(ms) > 0 for _, ms, _, _ in rows)
    cfg = checkpoint_memory.GPTConfig(n_layer=2, n_embd=32, n_head=2, block_size=32)
    times = checkpoint_memory.step_seconds(cfg, 2, rounds=3)
    assert {m: len(t) for m, t in times.items()} == {"none": 3, "full": 3, "selective": 3}


def test_negative_rounds_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        checkpoint_memory.main(["--rounds", "-1"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--rounds" in err, err
