"""CompleteP (model/parametrization=completep; Dey et al. 2025, α = 1) against oracles that share none
of its code: μP itself at the base depth (bit for bit), the plain-PyTorch μP model of test_mup.py with
the paper's branch multiplier 1/m_L and AdamW groups built here from its rules (ε × 1/m_L inside the
blocks), the init formula, and the depth coordinate check (the stream's update flat in depth, growing
without the multiplier). Bad input: one line naming the keys."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from gptlab.analysis.coord_check import depth_check, slopes
from gptlab.config import OptimConfig
from gptlab.model import GPT, GPTConfig
from gptlab.training.optim import build_adamw
from tests.model.test_mup import _train, oracle_logits
from tests.training.rel_harness import TINY, compose_cfg

OPT = OptimConfig(lr=3e-3, weight_decay=0.1, warmup_steps=0)


def cp(**kw) -> GPTConfig:
    base = dict(vocab_size=64, block_size=16, n_layer=4, n_head=2, n_embd=64, ffn="gelu", pos_emb="learned",
                parametrization="completep", mup_base_width=16, mup_base_depth=2)  # fmt: skip
    return GPTConfig(**(base | kw))


def test_completep_at_the_base_depth_is_mup_bit_for_bit() -> None:
    torch.manual_seed(3)
    completep = GPT(cp(n_layer=2))
    torch.manual_seed(3)
    mup = GPT(GPTConfig(**(cp(n_layer=2).to_dict() | {"parametrization": "mup", "mup_base_depth": None})))
    for (name, a), (_, b) in zip(completep.state_dict().items(), mup.state_dict().items(), strict=True):
        assert torch.equal(a, b), name
    for a, b in zip(_train(completep, 3), _train(mup, 3), strict=True):
        assert torch.equal(a, b)


def oracle_adamw(P: dict[str, torch.nn.Parameter], d: int, base: int, m_l: float) -> torch.optim.AdamW:
    """The paper's Table 1 at α = 1 on top of μP: no LR depends on depth; every parameter inside the
    blocks has Adam ε / m_L; the hidden matrices' LR / m and decay × m (as in test_mup.py)."""
    hidden = [p for n, p in P.items() if "_proj" in n]
    block_gains = [p for n, p in P.items() if n.startswith("blocks.") and p.dim() < 2]
    outer = [p for n, p in P.items() if not n.startswith("blocks.")]
    eps, wd = OPT.eps / m_l, OPT.weight_decay * d / base
    return torch.optim.AdamW(
        [
            {"params": [p for p in outer if p.dim() >= 2], "weight_decay": OPT.weight_decay},
            {"params": [p for p in outer if p.dim() < 2], "weight_decay": 0.0},
            {"params": block_gains, "weight_decay": 0.0, "eps": eps},
            {"params": hidden, "lr": OPT.lr * base / d, "eps": eps, "weight_decay": wd},
        ],
        lr=OPT.lr, betas=(OPT.beta1, OPT.beta2), eps=OPT.eps,
    )  # fmt: skip


@pytest.mark.parametrize("tied", [True, False])
def test_completep_matches_a_plain_pytorch_model_through_adamw_steps(tied: bool) -> None:
    d, base, heads, layers, base_depth = 64, 16, 2, 4, 2
    torch.manual_seed(0)
    ours = GPT(cp(tie_embeddings=tied)).double()
    P = {n: torch.nn.Parameter(p.detach().clone()) for n, p in ours.named_parameters()}
    m_l = layers / base_depth
    opt = oracle_adamw(P, d, base, m_l)
    batch = torch.randint(0, 64, (4, 17), generator=torch.Generator().manual_seed(1))
    x, y = batch[:, :-1], batch[:, 1:]
    our_opt = build_adamw(ours, OPT, "cpu")
    for step in range(5):
        want = oracle_logits(P, d, base, heads, layers, tied, x, branch=1 / m_l)
        got = ours(x)
        torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-10, msg=f"after {step} steps")
        for o, logits in ((opt, want), (our_opt, got)):
            o.zero_grad()
            F.cross_entropy(logits.flatten(0, 1), y.flatten()).backward()
            o.step()
    # sharp: without the branch multiplier the oracle's logits differ
    assert not torch.allclose(want, oracle_logits(P, d, base, heads, layers, tied, x), atol=1e-4)


def test_the_depth_scaled_init_is_the_base_depths() -> None:
    """global depth scaling at the base depth (1/sqrt(2·2)), whatever n_layer: the multiplier scales."""
    sigma = 0.02 / math.sqrt(2 * 2) / math.sqrt(64 / 16)
    for layers in (2, 8):
        torch.manual_seed(0)
        model = GPT(cp(n_layer=layers, n_embd=256, mup_base_width=64))
        out = dict(model.named_parameters())["blocks.0.attn.out_proj.weight"]
        assert out.std().item() == pytest.approx(sigma, rel=0.03), layers


def test_depth_coordinate_check_flat_under_completep_growing_under_mup() -> None:
    """The stream's change after 3 AdamW steps against depth 2 → 16 (width 32, base depth 2): the
    slope of log2 RMS on log2 L is CompleteP's within ±0.25 (measured 0.01), μP's (no multiplier)
    above 0.6 (measured 1.07; 1.7 at width 64: each block adds its own O(lr) update)."""
    common = dict(vocab_size=256, block_size=32, n_layer=2, n_head=2, n_embd=32, mup_base_width=32)
    flat = slopes(
        depth_check(
            GPTConfig(**common, parametrization="completep", mup_base_depth=2), [2, 4, 8, 16], 1e-2, 3
        )
    )
    grows = slopes(depth_check(GPTConfig(**common, parametrization="mup"), [2, 4, 8, 16], 1e-2, 3))
    assert abs(flat["stream update"]) < 0.25, flat
    assert grows["stream update"] > 0.6, grows


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            ["model.mup_base_width=16"],
            "model.mup_base_depth=None is not accepted with model.parametrization=completep",
        ),
        (["model.mup_base_width=16", "model.mup_base_depth=3"], "model.mup_base_depth=3 is not accepted"),
        (
            ["model.mup_base_width=16", "model.mup_base_depth=1", "model/placement=sandwich"],
            "model.parametrization=completep cannot be combined with model.norm_placement='sandwich'",
        ),
    ],
)
def test_bad_completep_settings_are_refused_naming_the_keys(overrides: list[str], message: str) -> None:
    from gptlab.training.app import validate

    with pytest.raises(ValueError) as err:
        validate(compose_cfg(*TINY, "model/parametrization=completep", *overrides))
    assert message in " ".join(str(err.value).split())


def test_export_refuses_completep_off_its_base_depth_and_takes_it_at_the_base() -> None:
    """HF's Llama has no branch multiplier: off the base depth the function cannot be written there."""
    from gptlab.export.targets import check_exportable

    with pytest.raises(ValueError) as err:
        check_exportable(GPTConfig(n_layer=4, n_embd=32, n_head=2, parametrization="completep",
                                   mup_base_width=32, mup_base_depth=2))  # fmt: skip
    assert str(err.value).startswith(
        "model.parametrization='completep' at model.n_layer=4 != model.mup_base_depth=2"
    )
    at_base = GPTConfig(
        n_layer=2, n_embd=32, n_head=2, parametrization="completep", mup_base_width=32, mup_base_depth=2
    )
    assert check_exportable(at_base) == "llama"


def test_the_depth_check_script_prints_slopes_and_refuses_bad_depths(tmp_path) -> None:
    from tests.conftest import run_script

    proc = run_script("scripts/depth_check.py", "--depths", "2,4", "--width", "32", "--seeds", "1",
                      "--out", str(tmp_path))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    rows = {
        line.split()[0] + " " + line.split()[1]: line.split()[2:] for line in proc.stdout.splitlines()[2:4]
    }
    assert set(rows) == {"stream at", "stream update"}
    assert (tmp_path / "depth_check.png").stat().st_size > 10_000
    saved = __import__("json").loads((tmp_path / "depth_check.json").read_text())
    assert set(saved["slopes"]) == {"mup", "completep"}
    bad = run_script("scripts/depth_check.py", "--depths", "4")
    assert bad.returncode == 2 and bad.stderr.startswith("error: --depths=4")


@pytest.mark.slow
def test_a_completep_run_trains_end_to_end_through_lightning(tmp_path, cache_dir) -> None:
    """The documented command's path (compose → validate → Lightning fit) at L = 2 on base depth 1,
    d = 32 on base 16: the blocks' branches run at 1/2 and training finishes with a finite loss."""
    from tests.training.rel_harness import train_here

    status = train_here(
        tmp_path, cache_dir, "model/parametrization=completep", "model.mup_base_width=16",
        "model.mup_base_depth=1", "trainer.max_steps=4", "trainer.val_check_interval=4",
    )  # fmt: skip
    assert status["status"] == "finished" and math.isfinite(status["final_val_loss"])
