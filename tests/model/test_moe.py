"""model/ffn=moe against a per-token oracle written here: Σ_k g_k·FFN_{e_k}(x) + the shared experts,
in float64, forward and gradients, for both compute paths; the balancing formulas from their papers."""

from __future__ import annotations

import copy
import math

import pytest
import torch
import torch.nn.functional as F

from gptlab.model import GPT, GPTConfig, moe
from gptlab.model.moe import MoE

D, H = 16, 24  # n_embd, expert width: multiples of 8 (grouped_mm's 16-byte strides in bf16)
ACT = {"swiglu": F.silu, "gelu": F.gelu}


def make_cfg(**moe_fields: object) -> GPTConfig:
    fields = {"n_experts": 4, "top_k": 2, "expert_hidden": H, **moe_fields}
    return GPTConfig.from_dict(
        {
            "n_layer": 2,
            "n_embd": D,
            "n_head": 2,
            "block_size": 16,
            "vocab_size": 64,
            "ffn": "moe",
            "moe": fields,
        }
    )


def make_layer(dtype: torch.dtype = torch.float64, **moe_fields: object) -> MoE:
    torch.manual_seed(0)
    layer = MoE(make_cfg(**moe_fields)).to(dtype)
    with torch.no_grad():
        for p in layer.parameters():
            p.normal_(0.0, 0.3)
        layer.expert_bias.normal_(0.0, 0.2)  # read only under balance=bias
    return layer


def ffn(
    x: torch.Tensor, gate: torch.Tensor | None, up: torch.Tensor, down: torch.Tensor, kind: str
) -> torch.Tensor:
    """One expert on one token; weights in x @ W layout."""
    h = ACT[kind](x @ gate) * (x @ up) if gate is not None else ACT[kind](x @ up)
    return h @ down


def oracle(layer: MoE, x: torch.Tensor) -> tuple[torch.Tensor, list[list[int]]]:
    """Token by token: score, choose top-k (the bias only in choosing), weigh, sum, add shared experts;
    under a capacity, an expert keeps its first C assignments in (token, choice) order."""
    m, ex = layer.mcfg, layer.experts
    kind = m.expert_ffn
    capacity = m.capacity(x.shape[0])
    taken = [0] * m.n_experts
    outs, choices = [], []
    for t in range(x.shape[0]):
        logits = layer.router.weight.to(x.dtype) @ x[t]
        s = torch.softmax(logits, 0) if m.router == "softmax" else torch.sigmoid(logits)
        pick = s + layer.expert_bias if m.balance == "bias" else s
        top = sorted(range(m.n_experts), key=lambda e: -float(pick[e].detach()))[: m.top_k]
        choices.append(top)
        g = s[top] / s[top].sum() if m.norm_topk else s[top]
        y = torch.zeros_like(x[t])
        for j, e in enumerate(top):
            taken[e] += 1
            if taken[e] <= capacity:
                gate = ex.gate_proj[e] if ex.gate_proj is not None else None
                y = y + g[j] * ffn(x[t], gate, ex.up_proj[e], ex.down_proj[e], kind)
        if layer.shared is not None:  # n_shared experts of width H, stored side by side
            sh = layer.shared
            for i in range(m.n_shared):
                rows = slice(i * H, (i + 1) * H)
                gate = sh.gate_proj.weight[rows].T if sh.gate_proj is not None else None
                y = y + ffn(x[t], gate, sh.up_proj.weight[rows].T, sh.down_proj.weight[:, rows].T, kind)
        outs.append(y)
    return torch.stack(outs), choices


CASES = {
    "softmax_renorm_aux": {},
    "softmax_raw_shared": {"norm_topk": False, "n_shared": 2},
    "sigmoid_bias": {"router": "sigmoid", "balance": "bias"},
    "gelu_experts_top1": {"expert_ffn": "gelu", "top_k": 1, "norm_topk": False},
    "capacity": {"capacity_factor": 0.75},
}


def grads(layer: MoE, x: torch.Tensor, out: torch.Tensor) -> list[torch.Tensor]:
    weight = torch.linspace(-1, 1, out.numel(), dtype=out.dtype).reshape(out.shape)
    params = [x, *layer.parameters()]
    return list(torch.autograd.grad((out * weight).sum(), params, allow_unused=True, materialize_grads=True))


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("impl", ["loop", "grouped"])
def test_layer_equals_per_token_oracle(case: str, impl: str) -> None:
    """Forward and every gradient: loop in float64, grouped (float32/bf16 only on CPU) in float32
    against the float64 oracle of the same weights."""
    if impl == "grouped" and not moe.grouped_mm_available():
        pytest.skip("this torch build has no torch._grouped_mm")
    dtype = torch.float64 if impl == "loop" else torch.float32
    layer = make_layer(dtype, impl=impl, **CASES[case])
    ref = copy.deepcopy(layer).double()
    x = torch.randn(3, 4, D, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    x_ours, x_ref = x.to(dtype).requires_grad_(), x.clone().requires_grad_()
    out = layer(x_ours)
    expected, _ = oracle(ref, x_ref.reshape(-1, D))
    tol = {"rtol": 1e-10, "atol": 1e-12} if dtype == torch.float64 else {"rtol": 1e-4, "atol": 1e-5}
    torch.testing.assert_close(out.double().reshape(-1, D), expected, **tol)
    for ours, theirs in zip(grads(layer, x_ours, out), grads(ref, x_ref, expected), strict=True):
        torch.testing.assert_close(ours.double(), theirs, **tol)


def test_capacity_drops_are_counted() -> None:
    layer = make_layer(capacity_factor=0.5, n_experts=4, top_k=2)
    x = torch.randn(12, D, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    layer(x)
    counts = layer.load.tolist()  # type: ignore[union-attr]
    capacity = math.ceil(0.5 * 12 * 2 / 4)
    assert sum(counts) == 24
    assert int(layer.dropped) == sum(max(0, c - capacity) for c in counts) > 0  # type: ignore[arg-type]


@pytest.mark.parametrize("router", ["softmax", "sigmoid"])
def test_aux_and_z_loss_formulas(router: str) -> None:
    """Switch/OLMoE: n_experts · Σ_i f_i · P_i, f_i = share of the N·k assignments, P_i = mean router
    probability (sigmoid scores normalised per token); ST-MoE's z: mean logsumexp(logits)²."""
    layer = make_layer(router=router)
    x = torch.randn(10, D, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    layer(x)
    _, choices = oracle(layer, x)
    E, k = 4, 2
    f = torch.tensor([sum(e in c for c in choices) for e in range(E)], dtype=torch.float64) / (10 * k)
    logits = x @ layer.router.weight.T
    probs = (
        logits.softmax(-1)
        if router == "softmax"
        else logits.sigmoid() / logits.sigmoid().sum(-1, keepdim=True)
    )
    torch.testing.assert_close(layer.aux_loss, E * (f * probs.mean(0)).sum())
    torch.testing.assert_close(layer.z_loss, (torch.logsumexp(logits, -1) ** 2).mean())
    assert layer.load.tolist() == [round(v * 10 * k) for v in f.tolist()]  # type: ignore[union-attr]
    # and they reach the objective with their coefficients
    penalty = moe.routing_loss(torch.nn.ModuleList([layer]))
    torch.testing.assert_close(penalty, 0.01 * layer.aux_loss + 0.001 * layer.z_loss)


def test_bias_moves_against_the_load() -> None:
    """DeepSeek-V3: b_i += γ·sign(mean load − load_i), from the step's summed loads; then cleared."""
    layer = make_layer(balance="bias", bias_update_rate=0.01, router="sigmoid")
    model = torch.nn.ModuleList([layer])
    before = layer.expert_bias.clone()
    loads = torch.zeros(4, dtype=torch.float64)
    for seed in (4, 5):  # two micro-batches of one optimizer step
        x = torch.randn(9, D, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))
        layer(x)
        _, choices = oracle(layer, x)
        loads += torch.tensor([sum(e in c for c in choices) for e in range(4)], dtype=torch.float64)
        moe.accumulate_load(model)
    moe.update_expert_bias(model)
    expected = before + 0.01 * torch.sign(loads.mean() - loads)
    assert (loads != loads.mean()).any()
    torch.testing.assert_close(layer.expert_bias, expected.to(layer.expert_bias.dtype))
    assert layer.step_load is None  # cleared for the next step


def test_counts_active_and_flops_of_the_active_path() -> None:
    """flops_per_token's N is the active one; FlopCounterMode on the loop path sees the same."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils.flop_counter import FlopCounterMode

    cfg = make_cfg(impl="loop", n_shared=1)
    model = GPT(cfg)
    T, B = cfg.block_size, 2
    per_expert = 3 * D * H
    assert moe.inactive_params(model) == 2 * (4 - 2) * per_expert
    idx = torch.randint(0, 64, (B, T + 1), generator=torch.Generator().manual_seed(0))
    counter = FlopCounterMode(display=False)
    with sdpa_kernel(SDPBackend.MATH), counter:
        logits = model(idx[:, :-1])
        F.cross_entropy(logits.reshape(-1, 64), idx[:, 1:].reshape(-1)).backward()
    counted = counter.get_total_flops() / (B * T)
    assert counted == pytest.approx(model.flops_per_token(), rel=0.01)
