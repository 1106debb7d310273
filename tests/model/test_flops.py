"""The FLOP formula 6·N + 12·L·T·d against torch's FlopCounterMode (forward + backward, per token)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from gptlab.model import GPT, GPTConfig

SHAPE = {"n_layer": 2, "n_embd": 64, "n_head": 4, "block_size": 64, "vocab_size": 256}
BATCH = 3


def counted_flops_per_token(model: GPT, backend: SDPBackend | None) -> float:
    """FLOPs FlopCounterMode sees for one training forward+backward, divided by the tokens."""
    T = model.cfg.block_size
    idx = torch.randint(0, model.cfg.vocab_size, (BATCH, T + 1), generator=torch.Generator().manual_seed(0))
    counter = FlopCounterMode(display=False)
    with sdpa_kernel(backend) if backend is not None else torch.enable_grad(), counter:
        logits = model(idx[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), idx[:, 1:].reshape(-1))
        loss.backward()
    return counter.get_total_flops() / (BATCH * T)


@pytest.mark.parametrize("tied", [True, False], ids=["tied", "untied"])
@pytest.mark.parametrize("pos_emb", ["rope", "learned"])
def test_formula_matches_flop_counter(tied: bool, pos_emb: str) -> None:
    # The math SDPA backend runs attention as two batched matmuls, which the counter sees (2·T·d per
    # token and layer each way, ×3 for forward+backward = 12·L·T·d: full attention, as the formula).
    model = GPT(GPTConfig.from_dict({**SHAPE, "tie_embeddings": tied, "pos_emb": pos_emb}))
    formula = model.flops_per_token()
    counted = counted_flops_per_token(model, SDPBackend.MATH)
    assert counted == pytest.approx(formula, rel=0.10)
    # what is left is the norm gains in N (elementwise work the counter does not count): under 1%
    assert counted < formula
    assert counted == pytest.approx(formula, rel=0.01)


def test_untied_head_is_compute_but_untied_embedding_is_not() -> None:
    """Untying adds V·d parameters but no matmul: N (and the counter) must stay the same."""
    tied = GPT(GPTConfig.from_dict({**SHAPE, "tie_embeddings": True}))
    untied = GPT(GPTConfig.from_dict({**SHAPE, "tie_embeddings": False}))
    V, d = SHAPE["vocab_size"], SHAPE["n_embd"]
    assert untied.num_params() - tied.num_params() == V * d
    assert untied.flops_per_token() == tied.flops_per_token()
    assert counted_flops_per_token(untied, SDPBackend.MATH) == counted_flops_per_token(tied, SDPBackend.MATH)


def test_cpu_flash_attention_is_invisible_to_the_counter() -> None:
    """Why the test above forces the math backend: on a CPU, SDPA dispatches to
    `_scaled_dot_product_flash_attention_for_cpu`, which FlopCounterMode has no formula for, so the
    default count misses exactly the attention term 12·L·T·d."""
    model = GPT(GPTConfig.from_dict(SHAPE))
    L, T, d = SHAPE["n_layer"], SHAPE["block_size"], SHAPE["n_embd"]
    default = counted_flops_per_token(model, None)
    math = counted_flops_per_token(model, SDPBackend.MATH)
    assert math - default == pytest.approx(12 * L * T * d, rel=1e-6)


@pytest.mark.parametrize("n_kv_head", [2, 1], ids=["gqa", "mqa"])
def test_formula_matches_flop_counter_with_fewer_kv_heads(n_kv_head: int) -> None:
    """Fewer key/value heads shrink N by k_proj and v_proj's lost columns (6·N counts them);
    q·kᵀ and p·v still run once per query head, so the attention term 12·L·T·d is unchanged."""
    mha = GPT(GPTConfig.from_dict(SHAPE))
    model = GPT(GPTConfig.from_dict({**SHAPE, "n_kv_head": n_kv_head}))
    L, d, kv = SHAPE["n_layer"], SHAPE["n_embd"], n_kv_head * SHAPE["n_embd"] // SHAPE["n_head"]
    assert mha.flops_per_token() - model.flops_per_token() == 6 * L * 2 * d * (d - kv)
    counted = counted_flops_per_token(model, SDPBackend.MATH)
    assert counted < model.flops_per_token()
    assert counted == pytest.approx(model.flops_per_token(), rel=0.01)
