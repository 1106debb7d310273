"""Parameter counts against closed-form formulas, written here from first principles."""

from __future__ import annotations

import itertools

import pytest
import torch

from gptlab.analysis.params import param_report
from gptlab.model import GPT, GPTConfig

PLACEMENTS = ("pre", "post", "sandwich", "deepnorm")
NORMS = ("rmsnorm", "layernorm")
FFNS = ("swiglu", "geglu", "reglu", "gelu", "gelu_tanh", "relu")
GATED = ("swiglu", "geglu", "reglu")

V, T, L, H, D, MULT = 100, 20, 3, 4, 40, 16


def make_cfg(placement, norm, ffn, tie, pos_emb, bias, **kw) -> GPTConfig:
    return GPTConfig(
        vocab_size=V,
        block_size=T,
        n_layer=L,
        n_head=H,
        n_embd=D,
        norm=norm,
        norm_placement=placement,
        ffn=ffn,
        ffn_multiple_of=MULT,
        tie_embeddings=tie,
        pos_emb=pos_emb,
        bias=bias,
        depth_scaled_init="none" if placement == "deepnorm" else "global",
        **kw,
    )


def on_meta(cfg: GPTConfig) -> GPT:
    """Counting needs shapes only: the meta device allocates nothing."""
    with torch.device("meta"):
        return GPT(cfg)


def hidden(d: int, ffn: str, multiple_of: int) -> int:
    """4·d ungated; gated: 8/3·d (equal budget with a third matrix), rounded up to multiple_of."""
    if ffn not in GATED:
        return 4 * d
    return multiple_of * -(-8 * d // (3 * multiple_of))  # integer ceil(8d / 3m) · m


def expected(placement, norm, ffn, tie, pos_emb, bias, d=D, ffn_hidden=None) -> dict[str, int]:
    h = ffn_hidden if ffn_hidden is not None else hidden(d, ffn, MULT)
    norm_params = d + (d if norm == "layernorm" and bias else 0)  # gain (+ bias); RMSNorm: gain
    per_block_norms = 4 if placement == "sandwich" else 2  # + attn_out_norm, ffn_out_norm
    attn = 4 * d * d + (4 * d if bias else 0)  # q, k, v, out: d×d (+ d bias each)
    if ffn in GATED:  # gate, up: d×h; down: h×d
        ffn_params = 3 * d * h + ((2 * h + d) if bias else 0)
    else:  # up: d×h; down: h×d
        ffn_params = 2 * d * h + ((h + d) if bias else 0)
    final = norm_params if placement in ("pre", "sandwich") else 0
    return {
        "tok_emb": V * d,
        "pos_emb": T * d if pos_emb == "learned" else 0,
        "attention": L * attn,
        "ffn": L * ffn_params,
        "norms": L * per_block_norms * norm_params + final,
        "lm_head": 0 if tie else V * d,  # no bias on the head
    }


# the full product without biases, and biases (which only add vectors) on one tying/pos choice:
# counting on the meta device costs ~15 ms a model, and the whole product would take ~10 s
VARIANTS = list(
    itertools.product(PLACEMENTS, NORMS, FFNS, (True, False), ("rope", "learned"), (False,))
) + list(itertools.product(PLACEMENTS, NORMS, FFNS, (False,), ("learned",), (True,)))


@pytest.mark.parametrize("placement,norm,ffn,tie,pos_emb,bias", VARIANTS)
def test_counts_match_closed_form(placement, norm, ffn, tie, pos_emb, bias):
    cfg = make_cfg(placement, norm, ffn, tie, pos_emb, bias)
    want = expected(placement, norm, ffn, tie, pos_emb, bias)
    model = GPT(cfg)  # on the CPU: tiny, and faster to build than on meta
    unique = {id(p): p.numel() for p in model.parameters()}
    assert model.num_params() == sum(unique.values()) == sum(want.values())

    report = param_report(cfg)
    assert report.counts == want
    assert report.total == sum(want.values())
    assert report.total_untied - report.total_tied == V * D == report.tying_saves


@pytest.mark.parametrize("placement,norm,ffn", list(itertools.product(PLACEMENTS, NORMS, FFNS)))
def test_tying_saves_exactly_vocab_times_width(placement, norm, ffn):
    tied = GPT(make_cfg(placement, norm, ffn, True, "rope", False))
    untied = GPT(make_cfg(placement, norm, ffn, False, "rope", False))
    assert untied.num_params() - tied.num_params() == V * D


def test_explicit_ffn_hidden_is_used():
    cfg = make_cfg("pre", "rmsnorm", "swiglu", True, "rope", False, ffn_hidden=72)
    want = expected("pre", "rmsnorm", "swiglu", True, "rope", False, ffn_hidden=72)
    assert on_meta(cfg).num_params() == sum(want.values())


def test_gated_hidden_width_rounds_up_to_multiple():
    # d=40: 8/3·40 = 106.67 → the next multiple of 16 is 112
    assert make_cfg("pre", "rmsnorm", "swiglu", True, "rope", False).hidden_dim == 112
    assert make_cfg("pre", "rmsnorm", "gelu", True, "rope", False).hidden_dim == 160


def test_swiglu_and_gelu_ffn_budgets_agree_at_768():
    def ffn_params(ffn: str) -> int:
        cfg = GPTConfig(n_embd=768, n_head=12, n_layer=1, ffn=ffn, ffn_multiple_of=1)
        return sum(p.numel() for p in on_meta(cfg).blocks[0].ffn.parameters())

    swiglu, gelu = ffn_params("swiglu"), ffn_params("gelu")
    assert swiglu == 3 * 768 * 2048  # h = 8/3·768 = 2048 exactly
    assert gelu == 2 * 768 * 3072  # h = 4·768
    assert abs(swiglu - gelu) / gelu < 0.01


def test_report_reproduces_the_seeds_tying_arithmetic():
    # V=128000, d=2048: tying saves V·d = 262,144,000 — "about 17.5% of a 1.5B model".
    # 19 blocks of d=2048 with SwiGLU (h = 256·ceil(8/3·2048/256) = 5632) make that model:
    # per block 4d² + 3dh + 2d = 51,382,272; + 2·V·d + d untied = 1,500,592,128.
    cfg = GPTConfig(
        vocab_size=128_000,
        block_size=2048,
        n_layer=19,
        n_head=16,
        n_embd=2048,
        ffn="swiglu",
        ffn_multiple_of=256,
        tie_embeddings=False,
    )
    report = param_report(cfg)
    assert report.total_untied == 1_500_592_128
    assert abs(report.total_untied - 1.5e9) / 1.5e9 < 0.001
    assert report.tying_saves == 262_144_000
    assert abs(report.tying_saves_fraction - 0.175) < 0.005
    assert report.total_tied == report.total_untied - 262_144_000


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("n_kv_head", [4, 2, 1], ids=["mha", "gqa", "mqa"])
def test_grouped_query_attention_counts_k_and_v_at_n_kv_head_heads(n_kv_head: int, bias: bool) -> None:
    """q and out stay d×d; k and v are d×(n_kv_head·d/H), their biases that width."""
    cfg = make_cfg("pre", "rmsnorm", "swiglu", True, "learned", bias, n_kv_head=n_kv_head)
    kv = n_kv_head * (D // H)
    want = expected("pre", "rmsnorm", "swiglu", True, "learned", bias)
    want["attention"] = L * (2 * D * D + 2 * D * kv + ((2 * D + 2 * kv) if bias else 0))
    assert param_report(cfg).counts == want
    assert on_meta(cfg).num_params() == sum(want.values())


def test_llama3_8b_shape_with_8_kv_heads_has_its_published_count() -> None:
    """Llama 3 8B (32 layers, d 4096, 32 query / 8 key-value heads, SwiGLU 14336, 128,256 ids,
    untied): per block 2·4096² + 2·4096·1024 + 3·4096·14336 + 2·4096, plus 2·V·d and the final norm,
    is 8,030,261,248 (the "8.03B" of its model card); with 32 key/value heads it would be 8.83B."""
    shape = dict(
        n_layer=32, n_embd=4096, n_head=32, ffn_hidden=14336, vocab_size=128256, tie_embeddings=False
    )
    assert on_meta(GPTConfig(**shape, n_kv_head=8)).num_params() == 8_030_261_248
    assert on_meta(GPTConfig(**shape)).num_params() == 8_030_261_248 + 32 * 2 * 4096 * (4096 - 1024)
