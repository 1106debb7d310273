"""model.norm=dyt: DyT(x) = γ ⊙ tanh(α·x) + β at every norm site (Zhu et al. 2025), issue 39 item 3.

The oracle is the formula written here in plain torch (forward, and α's gradient in closed form:
∂/∂α Σ g ⊙ (γ ⊙ tanh(αx) + β) = Σ g ⊙ γ ⊙ x ⊙ (1 - tanh²(αx))), and a block recomputed from it.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from gptlab.compose import compose_config
from gptlab.export.targets import check_exportable
from gptlab.model import GPT, GPTConfig
from gptlab.model.norms import DyT
from gptlab.training.optim import param_groups

SMALL = dict(n_layer=2, n_embd=32, n_head=2, block_size=16, vocab_size=64)
SITES = {  # placement -> the DyT sites of one block, and whether the model ends on a final one
    "pre": (("attn_norm", "ffn_norm"), True),
    "post": (("attn_norm", "ffn_norm"), False),
    "sandwich": (("attn_norm", "ffn_norm", "attn_out_norm", "ffn_out_norm"), True),
}


def dyt_formula(x: torch.Tensor, alpha: float, gamma: torch.Tensor, beta: torch.Tensor) -> torch.Tensor:
    return gamma * torch.tanh(alpha * x) + beta


def test_forward_and_alpha_gradient_match_the_formula() -> None:
    torch.manual_seed(0)
    m = DyT(8, alpha0=0.7)
    with torch.no_grad():  # away from the init so γ and β take part
        m.weight.copy_(torch.randn(8))
        m.bias.copy_(torch.randn(8))
    x = 3 * torch.randn(4, 5, 8)  # large enough for tanh to saturate
    g = torch.randn(4, 5, 8)
    y = m(x)
    assert torch.allclose(y, dyt_formula(x, 0.7, m.weight.detach(), m.bias.detach()), atol=1e-6)
    (y * g).sum().backward()
    t = torch.tanh(0.7 * x)
    want = (g * m.weight.detach() * x * (1 - t * t)).sum()
    assert m.alpha.grad is not None and m.alpha.grad.shape == (1,)
    assert torch.allclose(m.alpha.grad[0], want, rtol=1e-5)
    assert torch.allclose(m.weight.grad, (g * t).sum((0, 1)), rtol=1e-5)
    assert torch.allclose(m.bias.grad, g.sum((0, 1)), rtol=1e-5)


@pytest.mark.parametrize("placement", sorted(SITES))
def test_every_norm_site_is_dyt_with_its_init(placement: str) -> None:
    cfg = GPTConfig(**SMALL, norm="dyt", norm_placement=placement, dyt_alpha0=0.3)
    model = GPT(cfg)
    sites, final = SITES[placement]
    want = {f"blocks.{i}.{s}" for i in range(cfg.n_layer) for s in sites} | (
        {"final_norm"} if final else set()
    )
    found = {n for n, m in model.named_modules() if isinstance(m, DyT)}
    assert found == want
    norms = [n for n, m in model.named_modules() if isinstance(m, torch.nn.RMSNorm | torch.nn.LayerNorm)]
    assert norms == []  # no norm is left at any site
    for name in want:
        m = model.get_submodule(name)
        assert m.alpha.requires_grad and isinstance(m.alpha, torch.nn.Parameter)
        assert m.alpha.tolist() == pytest.approx([0.3])  # model.dyt_alpha0, through the init recipe
        assert torch.equal(m.weight, torch.ones(32)) and torch.equal(m.bias, torch.zeros(32))


@pytest.mark.parametrize("placement", sorted(SITES))
def test_block_output_matches_a_plain_torch_block(placement: str) -> None:
    """One block recomputed with the formula in place of each DyT, the branches called as they are."""
    torch.manual_seed(1)
    cfg = GPTConfig(**SMALL, norm="dyt", norm_placement=placement, dyt_alpha0=0.4)
    model = GPT(cfg)
    block = model.blocks[0]
    with torch.no_grad():  # each site its own α, γ, β
        for k, (_, m) in enumerate((n, m) for n, m in block.named_modules() if isinstance(m, DyT)):
            m.alpha.fill_(0.2 + 0.3 * k)
            m.weight.normal_(1.0, 0.2)
            m.bias.normal_(0.0, 0.2)

    def d(name: str, x: torch.Tensor) -> torch.Tensor:
        m = block.get_submodule(name)
        return dyt_formula(x, float(m.alpha), m.weight, m.bias)

    rope = (model.rope_cos, model.rope_sin)
    x = 2 * torch.randn(2, 16, 32)
    with torch.no_grad():
        if placement == "pre":
            h = x + block.attn(d("attn_norm", x), rope)
            want = h + block.ffn(d("ffn_norm", h))
        elif placement == "post":
            h = d("attn_norm", x + block.attn(x, rope))
            want = d("ffn_norm", h + block.ffn(h))
        else:
            h = x + d("attn_out_norm", block.attn(d("attn_norm", x), rope))
            want = h + d("ffn_out_norm", block.ffn(d("ffn_norm", h)))
        got = block(x, rope)
    assert torch.allclose(got, want, atol=1e-5)


def test_alpha_learns_under_training() -> None:
    torch.manual_seed(2)
    model = GPT(GPTConfig(**SMALL, norm="dyt"))
    opt = torch.optim.AdamW(param_groups(model, 0.1, 1e-2, 1e-8), lr=1e-2)
    idx = torch.randint(0, 64, (4, 17))
    before = {n: p.detach().clone() for n, p in model.named_parameters() if n.endswith(".alpha")}
    for _ in range(3):
        logits = model(idx[:, :-1])
        F.cross_entropy(logits.reshape(-1, 64), idx[:, 1:].reshape(-1)).backward()
        opt.step()
        opt.zero_grad()
    moved = [n for n, p in model.named_parameters() if n in before and not torch.equal(p, before[n])]
    assert sorted(moved) == sorted(before)  # every site's α took steps


def test_alpha_gamma_beta_sit_in_the_no_decay_group_like_norm_gains() -> None:
    """α (one element), γ and β (vectors) are norm gains and biases: the decay-free group under SP,
    and under μP/CompleteP the base-width LR (no 1/fan-in factor) with CompleteP's ε rule."""
    for extra in (
        {},
        dict(parametrization="mup", mup_base_width=16),
        dict(parametrization="completep", mup_base_width=16, mup_base_depth=1),
    ):
        model = GPT(GPTConfig(**SMALL, norm="dyt", **extra))
        groups = param_groups(model, weight_decay=0.1, lr=1e-3, eps=1e-8)
        where = {id(p): g for g in groups for p in g["params"]}
        for name, p in model.named_parameters():
            if name.rsplit(".", 1)[-1] in ("alpha", "weight", "bias") and "norm" in name:
                g = where[id(p)]
                assert g["weight_decay"] == 0.0, (extra, name)
                assert g.get("lr", 1e-3) == 1e-3, (extra, name)  # LR as at the base width
                completep = extra.get("parametrization") == "completep" and name.startswith("blocks.")
                assert g.get("eps", 1e-8) == pytest.approx(1e-8 / (2 if completep else 1)), (extra, name)


def test_compiles_as_one_graph() -> None:
    """A DyT block compiles with fullgraph=True (no graph break) and gives eager's values and α's grad."""
    torch.manual_seed(3)
    model = GPT(GPTConfig(**SMALL, norm="dyt"))
    block = model.blocks[0]
    rope = (model.rope_cos, model.rope_sin)
    x = torch.randn(2, 16, 32)
    compiled = torch.compile(block, fullgraph=True, backend="aot_eager")
    got = compiled(x, rope)
    got.sum().backward()
    g_compiled = block.attn_norm.alpha.grad.clone()
    block.zero_grad()
    want = block(x, rope)
    want.sum().backward()
    assert torch.allclose(got, want, atol=1e-6)
    assert torch.allclose(g_compiled, block.attn_norm.alpha.grad, rtol=1e-5)


@pytest.mark.slow
def test_compile_blocks_inductor_parity() -> None:
    from dev.bench.compile_parity import TOLERANCE, compile_parity

    r = compile_parity("pre", "swiglu", norm="dyt")
    assert r["compiled_blocks"] == r["n_layer"] == 2
    assert r["loss_diff"] < TOLERANCE and r["max_rel_grad_diff"] < TOLERANCE


def test_config_group_and_field() -> None:
    assert compose_config(["model/norm=dyt"]).model.norm == "dyt"
    assert compose_config(["model.norm=dyt"]).model.norm == "dyt"
    assert compose_config([]).model.dyt_alpha0 == 0.5
    assert compose_config(["model.norm=dyt", "model.dyt_alpha0=0.2"]).model.dyt_alpha0 == 0.2


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        (
            dict(norm="dyt", norm_placement="deepnorm", depth_scaled_init="none"),
            "model.norm=dyt cannot be combined with model.norm_placement=deepnorm",
        ),
        (dict(norm="dyt", dyt_alpha0=0.0), "model.dyt_alpha0=0.0 must be a positive finite number"),
        (dict(norm="dyt", dyt_alpha0=math.nan), "model.dyt_alpha0=nan must be a positive finite number"),
        (dict(norm="dyn"), "model.norm='dyn' is not accepted; choose one of rmsnorm, layernorm, dyt"),
    ],
)
def test_bad_inputs_are_one_line(fields: dict, expected: str) -> None:
    with pytest.raises(ValueError) as err:
        GPTConfig(**fields)
    assert str(err.value).startswith(expected) and "\n" not in str(err.value)


def test_hf_export_refuses_dyt_by_name() -> None:
    with pytest.raises(ValueError) as err:
        check_exportable(GPTConfig(norm="dyt"))
    assert str(err.value).startswith("model.norm='dyt' cannot be expressed by LlamaForCausalLM")
    assert "DyT" in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("placement", sorted(SITES))
def test_parameter_count_and_flops_count_alpha_gamma_beta(placement: str) -> None:
    """Each site holds 2d + 1 parameters (γ, β, α) where RMSNorm holds d: counted in the 6·N FLOPs."""
    sites, final = SITES[placement]
    n_sites = SMALL["n_layer"] * len(sites) + int(final)
    rms = GPT(GPTConfig(**SMALL, norm_placement=placement))
    dyt = GPT(GPTConfig(**SMALL, norm="dyt", norm_placement=placement))
    d = SMALL["n_embd"]
    assert dyt.num_params() - rms.num_params() == n_sites * (d + 1)
    assert dyt.flops_per_token() - rms.flops_per_token() == 6 * n_sites * (d + 1)


def test_init_from_a_hf_checkpoint_refuses_dyt(tmp_path) -> None:
    from gptlab.config import TrainConfig
    from gptlab.data.tokenizers import ByteTokenizer
    from gptlab.export import export_hf
    from gptlab.training.app import model_config

    hf = export_hf(GPT(GPTConfig(**SMALL)), tmp_path / "hf", None)
    cfg = TrainConfig(model=GPTConfig(init_from=str(hf), norm="dyt"))
    with pytest.raises(ValueError) as err:
        model_config(cfg, 64, ByteTokenizer())
    assert str(err.value).startswith("model.norm='dyt' cannot start from model.init_from=")
    assert "\n" not in str(err.value)
