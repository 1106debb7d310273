"""μP (model/parametrization=mup) against oracles that share none of its code: SP itself at the base
width (bit for bit), a plain-PyTorch μP model written here from Yang et al. 2022 (forward and a few
AdamW steps), and the paper's init-variance formula. Bad input: one line, exit 2."""

from __future__ import annotations

import math
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

from gptlab.config import OptimConfig
from gptlab.model import GPT, GPTConfig
from gptlab.training.optim import build_adamw
from tests.training.rel_harness import REPO, TINY, compose_cfg

OPT = OptimConfig(lr=3e-3, weight_decay=0.1, warmup_steps=0)


def _train(model: GPT, steps: int, seed: int = 0) -> list[torch.Tensor]:
    """Logits on one fixed batch before and after each of `steps` AdamW steps (the repo's groups)."""
    gen = torch.Generator().manual_seed(seed)
    batch = torch.randint(0, model.cfg.vocab_size, (4, model.cfg.block_size + 1), generator=gen)
    opt = build_adamw(model, OPT, "cpu")
    seen = []
    for _ in range(steps):
        logits = model(batch[:, :-1])
        seen.append(logits.detach().clone())
        loss = F.cross_entropy(logits.flatten(0, 1), batch[:, 1:].flatten())
        opt.zero_grad()
        loss.backward()
        opt.step()
    return seen + [model(batch[:, :-1]).detach()]


@pytest.mark.parametrize(
    "extra",
    [
        {},
        {"tie_embeddings": False, "ffn": "gelu", "pos_emb": "learned"},
        {"init_std": "1/sqrt(d)", "norm": "layernorm", "qk_norm": True, "norm_placement": "sandwich"},
    ],
)
def test_mup_at_the_base_width_is_sp_bit_for_bit(extra: dict) -> None:
    cfg = GPTConfig(vocab_size=64, block_size=16, n_layer=2, n_head=2, n_embd=32, **extra)
    torch.manual_seed(3)
    sp = GPT(cfg)
    torch.manual_seed(3)
    mup = GPT(GPTConfig(**(cfg.to_dict() | {"parametrization": "mup", "mup_base_width": 32})))
    for (name, a), (_, b) in zip(sp.state_dict().items(), mup.state_dict().items(), strict=True):
        assert torch.equal(a, b), name
    for a, b in zip(_train(sp, 3), _train(mup, 3), strict=True):
        assert torch.equal(a, b)


# ---- the oracle: μP written out in plain PyTorch from the paper (Table 8's multiplier form, Adam) ----


def _rms(x: torch.Tensor, g: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * g


def oracle_logits(
    P: dict[str, torch.Tensor],
    d: int,
    base: int,
    heads: int,
    layers: int,
    tied: bool,
    idx,
    dh0: int | None = None,
    branch: float = 1.0,
):
    """Pre-RMSNorm GPT with learned positions and a GELU FFN, μP's two forward multipliers
    (and CompleteP's branch multiplier 1/m_L on each block's two branches, 1 under μP):
    attention logits × sqrt(d_h0)/d_h (d_h0 = base/heads, or the base's head width when heads are added
    at a fixed width), output logits × base/d."""
    B, T = idx.shape
    dh, dh0 = d // heads, dh0 or base // heads
    x = P["tok_emb.weight"][idx] + P["pos_emb.weight"][:T]
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    for i in range(layers):
        p = f"blocks.{i}."
        h = _rms(x, P[p + "attn_norm.weight"])
        q, k, v = (
            (h @ P[p + f"attn.{n}_proj.weight"].T).view(B, T, heads, dh).transpose(1, 2) for n in "qkv"
        )
        att = (q @ k.transpose(-1, -2)) * (math.sqrt(dh0) / dh)
        att = att.masked_fill(~mask, float("-inf")).softmax(-1)
        x = x + branch * ((att @ v).transpose(1, 2).reshape(B, T, d) @ P[p + "attn.out_proj.weight"].T)
        h = _rms(x, P[p + "ffn_norm.weight"])
        x = x + branch * (F.gelu(h @ P[p + "ffn.up_proj.weight"].T) @ P[p + "ffn.down_proj.weight"].T)
    head = P["tok_emb.weight"] if tied else P["lm_head.weight"]
    return (_rms(x, P["final_norm.weight"]) @ head.T) * (base / d)


def oracle_adamw(P: dict[str, torch.nn.Parameter], d: int, base: int) -> torch.optim.AdamW:
    """Adam LR / (fan_in / base fan_in) for the hidden matrices (every one of them has fan-in ∝ d here:
    d, or 4d for down), the configured LR for embeddings, head, gains; decay on matrices, the hidden
    ones' × the same fan-in ratio so that AdamW's per-step decay lr·wd is the base's."""
    hidden = [p for n, p in P.items() if "_proj" in n]
    other = [p for n, p in P.items() if "_proj" not in n and p.dim() >= 2]
    gains = [p for p in P.values() if p.dim() < 2]
    return torch.optim.AdamW(
        [
            {"params": other, "weight_decay": OPT.weight_decay},
            {"params": gains, "weight_decay": 0.0},
            {"params": hidden, "weight_decay": OPT.weight_decay * d / base, "lr": OPT.lr * base / d},
        ],
        lr=OPT.lr,
        betas=(OPT.beta1, OPT.beta2),
        eps=OPT.eps,
    )


@pytest.mark.parametrize("tied", [True, False])
def test_mup_matches_a_plain_pytorch_mup_model_through_adamw_steps(tied: bool) -> None:
    d, base, heads, layers = 64, 16, 2, 2
    cfg = GPTConfig(
        vocab_size=64, block_size=16, n_layer=layers, n_head=heads, n_embd=d, ffn="gelu",
        pos_emb="learned", tie_embeddings=tied, parametrization="mup", mup_base_width=base,
    )  # fmt: skip
    torch.manual_seed(0)
    ours = GPT(cfg).double()
    P = {n: torch.nn.Parameter(p.detach().clone()) for n, p in ours.named_parameters()}
    assert ("lm_head.weight" in P) is not tied
    opt = oracle_adamw(P, d, base)
    gen = torch.Generator().manual_seed(1)
    batch = torch.randint(0, 64, (4, 17), generator=gen)
    x, y = batch[:, :-1], batch[:, 1:]
    expected = []
    for _ in range(4):
        logits = oracle_logits(P, d, base, heads, layers, tied, x)
        expected.append(logits.detach().clone())
        opt.zero_grad()
        F.cross_entropy(logits.flatten(0, 1), y.flatten()).backward()
        opt.step()
    expected.append(oracle_logits(P, d, base, heads, layers, tied, x).detach())
    got = _train_on(ours, x, y, 4)
    for step, (a, b) in enumerate(zip(got, expected, strict=True)):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-10, msg=f"after {step} steps")
    # the oracle is sharp: SP's logits (no 1/m) are not μP's
    assert not torch.allclose(expected[0], expected[0] * d / base)


def test_mup_with_heads_added_at_a_fixed_width_keeps_sps_attention_scale() -> None:
    """A ladder that grows heads at a fixed head width (ladder_ffn_mup): the base model of width 16 has
    2 heads of 8, the model of width 64 has 8 heads of 8; d_h = d_h0, so μP's sqrt(d_h0)/d_h is SP's
    1/sqrt(d_h). The old rule (d_h0 = base/n_head = 2) halved it."""
    d, base, heads, layers = 64, 16, 8, 2
    cfg = GPTConfig(
        vocab_size=64, block_size=16, n_layer=layers, n_head=heads, n_embd=d, ffn="gelu", pos_emb="learned",
        tie_embeddings=True, parametrization="mup", mup_base_width=base, mup_base_head_dim=8,
    )  # fmt: skip
    torch.manual_seed(0)
    ours = GPT(cfg).double()
    with torch.no_grad():  # queries and keys of a trained size: at init's σ the attention is near uniform
        for name, p in ours.named_parameters():
            if name.endswith(("q_proj.weight", "k_proj.weight")):
                p.normal_(0.0, 0.5)
    P = {n: p.detach().clone() for n, p in ours.named_parameters()}
    x = torch.randint(0, 64, (2, 16), generator=torch.Generator().manual_seed(1))
    want = oracle_logits(P, d, base, heads, layers, True, x, dh0=8)
    torch.testing.assert_close(ours(x).detach(), want, rtol=1e-9, atol=1e-10)
    narrowed = oracle_logits(P, d, base, heads, layers, True, x)  # the base keeping 8 heads of 2
    assert not torch.allclose(want, narrowed, atol=1e-4)


def _train_on(model: GPT, x: torch.Tensor, y: torch.Tensor, steps: int) -> list[torch.Tensor]:
    opt = build_adamw(model, OPT, "cpu")
    seen = []
    for _ in range(steps):
        logits = model(x)
        seen.append(logits.detach().clone())
        opt.zero_grad()
        F.cross_entropy(logits.flatten(0, 1), y.flatten()).backward()
        opt.step()
    return seen + [model(x).detach()]


def test_mup_init_follows_the_papers_variance_rule() -> None:
    """Var ∝ 1/fan_in for hidden matrices (σ = σ_base·sqrt(base fan-in / fan-in)), the base σ for the
    embedding and the head; the depth factor 1/sqrt(2L) on the stream writers stays."""
    d, base, L, s = 512, 64, 2, 0.02
    cfg = GPTConfig(vocab_size=512, n_layer=L, n_head=4, n_embd=d, ffn="gelu", tie_embeddings=False,
                    parametrization="mup", mup_base_width=base)  # fmt: skip
    torch.manual_seed(0)
    model = GPT(cfg)
    m = d / base
    want = {
        "tok_emb.weight": s,
        "lm_head.weight": s,
        "blocks.0.attn.q_proj.weight": s / math.sqrt(m),
        "blocks.1.attn.v_proj.weight": s / math.sqrt(m),
        "blocks.0.attn.out_proj.weight": s / math.sqrt(2 * L) / math.sqrt(m),
        "blocks.1.ffn.up_proj.weight": s / math.sqrt(m),
        "blocks.0.ffn.down_proj.weight": s / math.sqrt(2 * L) / math.sqrt(4 * d / (4 * base)),
    }
    params = dict(model.named_parameters())
    for name, sigma in want.items():
        assert params[name].std().item() == pytest.approx(sigma, rel=0.03), name


# ---- bad input ----


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["model.mup_base_width=24"], "model.mup_base_width=24 does not divide model.n_embd=32"),
        (["model.mup_base_width=64"], "model.mup_base_width=64 exceeds model.n_embd=32"),
        ([], "model.mup_base_width=None is not accepted with model.parametrization=mup"),
        (["model.mup_base_width=1"], "model.mup_base_width=1 is not divisible by model.n_head=2"),
        (
            ["model/placement=deepnorm", "model.depth_scaled_init=none", "model.mup_base_width=16"],
            "model.parametrization=mup cannot be combined with model.norm_placement=deepnorm",
        ),
        (["model.mup_base_width=16", "model.ffn_hidden=96"], "model.ffn_hidden=96 cannot be combined with"),
        (["model.mup_base_width=16", "model.mup_base_head_dim=3"], "model.mup_base_head_dim=3 is not"),
        (["model.mup_base_width=32", "model.mup_base_head_dim=8"], "model.mup_base_head_dim=8 is not"),
    ],
)
def test_bad_mup_settings_are_refused_naming_the_keys(overrides: list[str], message: str) -> None:
    from gptlab.training.app import validate

    with pytest.raises(ValueError, match=None) as err:
        validate(compose_cfg(*TINY, "model/parametrization=mup", *overrides))
    assert message in " ".join(str(err.value).split())


@pytest.mark.slow
def test_cli_bad_mup_base_width_is_one_line_exit_2(tmp_path) -> None:
    run = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, str(REPO / "train.py"), *TINY, "model/parametrization=mup",
         "model.mup_base_width=24", f"hydra.run.dir={run}"],  # fmt: skip
        capture_output=True, text=True, timeout=300, cwd=REPO,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith("error: model.mup_base_width=24 does not divide")
    assert not (run / "checkpoints").exists()


def test_export_refuses_mup_off_its_base_width_and_accepts_it_at_the_base() -> None:
    """transformers' Llama/GPT-2 have no output multiplier or 1/d_head scale: a μP model is exported
    only where it is SP (its logits there are SP's, test above)."""
    from gptlab.export.targets import check_exportable

    with pytest.raises(ValueError) as err:
        check_exportable(GPTConfig(n_embd=64, n_head=2, parametrization="mup", mup_base_width=32))
    assert str(err.value).startswith(
        "model.parametrization='mup' at model.n_embd=64 != model.mup_base_width=32"
    )
    assert (
        check_exportable(GPTConfig(n_embd=32, n_head=2, parametrization="mup", mup_base_width=32)) == "llama"
    )


def test_mup_hidden_groups_get_lr_over_fan_in_and_group_0_keeps_the_configured_lr() -> None:
    """Gated FFN: down's fan-in is the FFN width (64·ceil(8d/3/64)), not d: 704/128 = 5.5 at d = 256,
    base 32; q, k, v, out, gate, up: 256/32 = 8."""
    cfg = GPTConfig(n_layer=1, n_head=2, n_embd=256, parametrization="mup", mup_base_width=32)
    model = GPT(cfg)
    opt = build_adamw(model, OPT, "cpu")
    lr_of = {id(p): g["lr"] for g in opt.param_groups for p in g["params"]}
    params = dict(model.named_parameters())
    assert opt.param_groups[0]["lr"] == OPT.lr and lr_of[id(params["tok_emb.weight"])] == OPT.lr
    assert lr_of[id(params["blocks.0.attn_norm.weight"])] == OPT.lr
    for name in ("attn.q_proj", "attn.out_proj", "ffn.gate_proj", "ffn.up_proj"):
        assert lr_of[id(params[f"blocks.0.{name}.weight"])] == pytest.approx(OPT.lr / 8)
    assert lr_of[id(params["blocks.0.ffn.down_proj.weight"])] == pytest.approx(OPT.lr / (704 / 128))


@pytest.mark.slow
def test_a_mup_run_trains_end_to_end_through_lightning(tmp_path, cache_dir) -> None:
    """The documented μP command's path (compose → validate → Lightning fit), at d = 32 on base 16,
    with layer telemetry on (its attention stats read the model's μP scale)."""
    from tests.training.rel_harness import series, train_here

    status = train_here(
        tmp_path, cache_dir, "model/parametrization=mup", "model.mup_base_width=16",
        "trainer.max_steps=4", "trainer.val_check_interval=4", "callbacks.telemetry.attention_every=1",
    )  # fmt: skip
    assert status["status"] == "finished" and math.isfinite(status["final_val_loss"])
    logged = series(tmp_path, "attn_logit_max/block_00")
    assert logged and all(math.isfinite(v) for v in logged.values())


@pytest.mark.slow
def test_compiled_blocks_train_the_mup_model_as_eager_does(monkeypatch: pytest.MonkeyPatch) -> None:
    """compile=true's path (strategies.compile_blocks) on a μP model: Dynamo traces the attention's
    μP scale and the optimizer keeps its groups. Backend aot_eager (forward and backward graphs
    through AOTAutograd, no C++ build on this CPU)."""
    import copy

    from gptlab.training.strategies import compile_blocks

    original = torch.nn.Module.compile
    monkeypatch.setattr(torch.nn.Module, "compile", lambda self, **kw: original(self, backend="aot_eager"))
    torch._dynamo.reset()
    cfg = GPTConfig(vocab_size=64, block_size=16, n_layer=2, n_head=2, n_embd=64,
                    parametrization="mup", mup_base_width=16)  # fmt: skip
    torch.manual_seed(0)
    eager = GPT(cfg)
    compiled = copy.deepcopy(eager)
    compile_blocks(compiled)
    assert all(b._compiled_call_impl is not None for b in compiled.blocks)
    for a, b in zip(_train(eager, 3), _train(compiled, 3), strict=True):
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-6)
