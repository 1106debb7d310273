"""Grouped-query and multi-query attention (model.n_kv_head) against attention written here in plain
torch: K and V projected to n_kv_head heads, each repeated for its n_head/n_kv_head query heads
(query head h reads key/value head h // group), then softmax(q·kᵀ/√d_h + causal mask)·v."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from gptlab.compose import compose_config
from gptlab.config import OptimConfig
from gptlab.model import GPT, GPTConfig
from gptlab.model.attention import CausalSelfAttention
from gptlab.training.optim import build_adamw
from tests.conftest import QUICK_ENV, column, read_csv_metrics, run_script


def plain_attention(attn: CausalSelfAttention, x: torch.Tensor, n_head: int, n_kv_head: int) -> torch.Tensor:
    """The attention block from its weights, with autograd through them: no SDPA, no enable_gqa."""
    B, T, C = x.shape
    D = C // n_head
    q = (x @ attn.q_proj.weight.T).view(B, T, n_head, D).transpose(1, 2)
    k = (x @ attn.k_proj.weight.T).view(B, T, n_kv_head, D).transpose(1, 2)
    v = (x @ attn.v_proj.weight.T).view(B, T, n_kv_head, D).transpose(1, 2)
    # key/value head j serves query heads j·group ... (j+1)·group - 1
    k, v = k.repeat_interleave(n_head // n_kv_head, dim=1), v.repeat_interleave(n_head // n_kv_head, dim=1)
    s = q @ k.transpose(-1, -2) / math.sqrt(D)
    s = s.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
    y = torch.softmax(s, dim=-1) @ v
    return y.transpose(1, 2).reshape(B, T, C) @ attn.out_proj.weight.T


@pytest.mark.parametrize("n_kv_head", [8, 4, 2, 1], ids=["mha", "gqa4", "gqa2", "mqa"])
def test_attention_equals_plain_torch_with_repeated_kv_heads(n_kv_head: int) -> None:
    """Forward and every gradient (input, q/k/v/out weights) in float64, against the oracle above."""
    torch.manual_seed(0)
    cfg = GPTConfig(n_head=8, n_kv_head=n_kv_head, n_embd=64, pos_emb="learned", block_size=16)
    attn = CausalSelfAttention(cfg).double().eval()
    assert attn.k_proj.weight.shape == attn.v_proj.weight.shape == (n_kv_head * 8, 64)
    x = torch.randn(3, 16, 64, dtype=torch.float64, requires_grad=True)
    g = torch.randn(3, 16, 64, dtype=torch.float64)  # a random cotangent: every output entry matters
    weights = [attn.q_proj.weight, attn.k_proj.weight, attn.v_proj.weight, attn.out_proj.weight]
    got = attn(x, None)
    got_grads = torch.autograd.grad(got, [x, *weights], g)
    want = plain_attention(attn, x, 8, n_kv_head)
    want_grads = torch.autograd.grad(want, [x, *weights], g)
    torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-10)
    for name, a, b in zip(["x", "q", "k", "v", "out"], got_grads, want_grads, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10, msg=lambda m, n=name: f"grad {n}: {m}")


def test_null_n_kv_head_is_multi_head() -> None:
    cfg = GPTConfig(n_head=4, n_embd=32)
    assert cfg.n_kv_head is None and cfg.kv_heads == 4
    assert CausalSelfAttention(cfg).k_proj.weight.shape == (32, 32)


@pytest.mark.parametrize("bad", [0, -2, 3, 5, True, 2.0, "2"])
def test_n_kv_head_must_divide_n_head_and_be_at_least_one(bad: object) -> None:
    with pytest.raises(
        ValueError, match=r"^model\.n_kv_head=.* is not accepted with model\.n_head=4; give null"
    ):
        GPTConfig(n_head=4, n_embd=32, n_kv_head=bad)  # type: ignore[arg-type]


def test_attention_group_sets_n_kv_head() -> None:
    assert compose_config([]).model.n_kv_head is None
    assert compose_config(["model/attention=mha"]).model.n_kv_head is None
    assert compose_config(["model/attention=gqa"]).model.n_kv_head == 2
    assert compose_config(["model/attention=mqa"]).model.n_kv_head == 1
    assert compose_config(["model=llama_7b", "model/attention=gqa", "model.n_kv_head=8"]).model.n_kv_head == 8


def test_gqa_model_trains_a_step_and_compiles() -> None:
    """The whole model with RoPE and QK-norm: a backward reaches the smaller K/V, and
    torch.compile(fullgraph=True) takes enable_gqa without a graph break."""
    torch.manual_seed(0)
    cfg = GPTConfig(n_layer=2, n_head=4, n_kv_head=2, n_embd=32, block_size=16, vocab_size=64, qk_norm=True)
    model = GPT(cfg)
    idx = torch.randint(0, 64, (2, 16))
    eager = model(idx)
    eager.square().mean().backward()
    assert model.blocks[0].attn.k_proj.weight.grad is not None
    compiled = torch.compile(model, fullgraph=True, backend="aot_eager")
    torch.testing.assert_close(compiled(idx), eager, rtol=1e-5, atol=1e-5)


def test_mup_and_completep_give_k_and_v_the_rules_of_q() -> None:
    """k_proj and v_proj are hidden matrices of fan-in d, as q_proj is (fewer output columns do
    not enter μP's rules, which read the fan-in): init σ·(d/d0)^(-1/2), Adam LR × d0/d, decay ÷
    the same, and under CompleteP Adam ε × 1/m_L. By formula at d = 256 on base 32 (m = 8), depth 4
    on base 2 (m_L = 2), 2 key/value heads for 8 query heads."""
    cfg = GPTConfig(
        n_layer=4, n_head=8, n_kv_head=2, n_embd=256, vocab_size=64, block_size=16,
        parametrization="completep", mup_base_width=32, mup_base_depth=2,
    )  # fmt: skip
    torch.manual_seed(0)
    model = GPT(cfg)
    opt = OptimConfig()
    groups = {id(p): g for g in build_adamw(model, opt, "cpu").param_groups for p in g["params"]}
    params = dict(model.named_parameters())
    for i in range(cfg.n_layer):
        for name in ("q_proj", "k_proj", "v_proj"):
            p = params[f"blocks.{i}.attn.{name}.weight"]
            g = groups[id(p)]
            assert g["lr"] == pytest.approx(opt.lr / 8), name
            assert g["weight_decay"] == pytest.approx(opt.weight_decay * 8), name
            assert g["eps"] == pytest.approx(opt.eps / 2), name
            assert p.std().item() == pytest.approx(cfg.init_std / math.sqrt(8), rel=0.05), name


def test_mup_at_its_base_width_is_sp_bit_for_bit_with_grouped_kv_heads() -> None:
    base = dict(vocab_size=64, block_size=16, n_layer=2, n_head=4, n_kv_head=2, n_embd=32)
    torch.manual_seed(3)
    sp = GPT(GPTConfig(**base))
    torch.manual_seed(3)
    mup = GPT(GPTConfig(**base, parametrization="mup", mup_base_width=32))
    idx = torch.randint(0, 64, (2, 16))
    for (name, a), (_, b) in zip(sp.state_dict().items(), mup.state_dict().items(), strict=True):
        assert torch.equal(a, b), name
    assert torch.equal(sp(idx), mup(idx))


QUICK = [
    "trainer.max_steps=4", "trainer.val_check_interval=4", "trainer.log_every_n_steps=1",
    "trainer.enable_progress_bar=false", "data.max_bytes=400000", "data.val_windows=8",
    "sample.max_new_tokens=0", "logger=csv", "callbacks.telemetry.attention_every=1",
    "callbacks.telemetry.figures=false", "callbacks.tasks.names=[]",  # neither is read here
]  # fmt: skip


@pytest.mark.slow
def test_train_py_trains_the_default_model_with_grouped_query_attention(tmp_path: Path) -> None:
    """`python train.py model/attention=gqa model.n_kv_head=2` (the default model: 4 layers, 4
    heads of 32), shortened to 4 steps: it finishes, k_proj/v_proj are 2 heads wide in the
    checkpoint, and the attention telemetry (per query head) is logged and finite."""
    run = tmp_path / "run"
    proc = run_script(
        "train.py", "model/attention=gqa", "model.n_kv_head=2", *QUICK,
        f"hydra.run.dir={run}", f"data.cache_dir={tmp_path / 'cache'}", env=QUICK_ENV,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((run / "metrics.json").read_text())
    assert summary["status"] == "finished" and math.isfinite(summary["final_val_loss"])
    ckpt = torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)
    assert ckpt["hyper_parameters"]["model"]["n_kv_head"] == 2
    for name in ("k_proj", "v_proj"):
        assert ckpt["state_dict"][f"model.blocks.0.attn.{name}.weight"].shape == (64, 128)
    logged = column(read_csv_metrics(run), "attn_entropy/block_00")
    assert logged and all(math.isfinite(v) for _, v in logged)


def bad_n_kv_head_line(bad: str) -> str:
    return (
        f"error: model.n_kv_head={bad} is not accepted with model.n_head=4; give null (= n_head, "
        "multi-head), 1 (multi-query) or a divisor of n_head (grouped-query)"
    )


@pytest.mark.slow
def test_train_py_refuses_a_bad_n_kv_head_in_one_line(tmp_path: Path) -> None:
    """The CLI contract once, in a process (exit 2, no traceback, the one line); the other bad value
    through the code the CLI runs (compose → validate), in this process: the same line."""
    from gptlab.errors import USER_ERRORS, one_line
    from gptlab.training.app import validate
    from tests.training.rel_harness import compose_cfg

    proc = run_script("train.py", "model.n_kv_head=3", f"hydra.run.dir={tmp_path / 'run'}")
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == bad_n_kv_head_line("3")
    with pytest.raises(USER_ERRORS) as err:
        validate(compose_cfg("model.n_kv_head=0"))
    assert one_line(err.value) == bad_n_kv_head_line("0")


@pytest.mark.slow
def test_ablate_attention_quick_runs_and_reports_both_arms(tmp_path: Path) -> None:
    """`python train.py -m experiment=ablate_attention_quick` at one of its two LRs: 4 jobs of MHA
    and MQA (2 seeds), a report with the arm − baseline row; each arm's jobs were built with its own
    key/value heads."""
    out = tmp_path / "sweep"
    proc = run_script(
        "train.py", "-m", "experiment=ablate_attention_quick", f"hydra.sweep.dir={out}",
        f"data.cache_dir={tmp_path / 'cache'}", "logger=csv", "hydra.sweeper.lr.points=1",
        "callbacks.tasks.names=[]", env=QUICK_ENV, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = (out / "report.md").read_text()
    assert "4 job(s): 4 finished" in report and "| `mqa` | `mha` |" in report
    statuses = {json.loads((out / str(k) / "metrics.json").read_text())["status"] for k in range(4)}
    assert statuses == {"finished"}
    for k, heads in ((0, None), (1, 1), (2, None), (3, 1)):  # job order: seed, arm (one LR)
        ckpt = torch.load(out / str(k) / "checkpoints" / "last.ckpt", weights_only=True)
        assert ckpt["hyper_parameters"]["model"]["n_kv_head"] == heads
