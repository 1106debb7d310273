"""Sliding windows with a local/global pattern (model.window, model.window_pattern) and document
masking (data.document_mask) against a dense masked oracle written here in float64: the masks from
their definitions by loops, the attention in plain torch, forward and gradients."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend

from gptlab.model import GPT, GPTConfig
from gptlab.model.masks import Documents
from tests.model.test_flops import SHAPE, counted_flops_per_token

SMALL = {"n_layer": 4, "n_head": 4, "n_embd": 32, "block_size": 16, "vocab_size": 64}
EOT = 0


def allowed(T: int, window: int | None, tokens: list[int] | None) -> torch.Tensor:
    """(T, T) bool by the definitions: key j <= query i; with a window W, i - j < W (W keys, the
    query's own included); with documents, j and i in one document, where an eot opens a document."""
    doc = [0] * T
    if tokens is not None:
        n = 0
        for t, tok in enumerate(tokens):
            n += tok == EOT
            doc[t] = n
    m = torch.zeros(T, T, dtype=torch.bool)
    for i in range(T):
        for j in range(i + 1):
            m[i, j] = (window is None or i - j < window) and doc[i] == doc[j]
    return m


def positions(tokens: list[int], restart: bool) -> list[int]:
    """0..T-1, or counting from 0 again at each eot."""
    out, p = [], -1
    for tok in tokens:
        p = 0 if restart and tok == EOT else p + 1
        out.append(p)
    return out


def oracle_attention(attn, x: torch.Tensor, cfg: GPTConfig, mask: torch.Tensor, pos: torch.Tensor | None):
    """q/k/v from the weights, RoPE at the given (B, T) positions, logits q·kᵀ/√d_h (capped), the mask,
    softmax, W_O; key/value heads repeated for their query heads."""
    B, T, C = x.shape
    H, D, Hkv = cfg.n_head, cfg.head_dim, cfg.kv_heads
    q = (x @ attn.q_proj.weight.T).view(B, T, H, D).transpose(1, 2)
    k = (x @ attn.k_proj.weight.T).view(B, T, Hkv, D).transpose(1, 2).repeat_interleave(H // Hkv, 1)
    v = (x @ attn.v_proj.weight.T).view(B, T, Hkv, D).transpose(1, 2).repeat_interleave(H // Hkv, 1)
    if pos is not None:
        ang = pos[:, None, :, None].double() * cfg.rope_theta ** (-torch.arange(0, D // 2).double() * 2 / D)
        cos, sin = ang.cos(), ang.sin()

        def rope(z):
            a, b = z[..., : D // 2], z[..., D // 2 :]
            return torch.cat([a * cos - b * sin, b * cos + a * sin], dim=-1)

        q, k = rope(q), rope(k)
    s = q @ k.transpose(-1, -2) / math.sqrt(D)
    if cfg.attn_softcap is not None:
        s = cfg.attn_softcap * torch.tanh(s / cfg.attn_softcap)
    s = s.masked_fill(~mask, float("-inf"))
    y = torch.softmax(s, dim=-1) @ v
    return y.transpose(1, 2).reshape(B, T, C) @ attn.out_proj.weight.T


def oracle_logits(model: GPT, idx: torch.Tensor, restart: bool | None) -> torch.Tensor:
    """The pre-norm GPT with the oracle's attention; its own embeddings, norms and FFNs. restart:
    None = no documents."""
    cfg = model.cfg
    B, T = idx.shape
    rows = [r.tolist() for r in idx]
    pos = torch.tensor([positions(r, bool(restart)) for r in rows])
    x = model.tok_emb(idx)
    if model.pos_emb is not None:
        x = x + model.pos_emb(pos)
    for i, block in enumerate(model.blocks):
        letter = "S" if cfg.window_pattern is None else cfg.window_pattern[i % len(cfg.window_pattern)]
        window = cfg.window if letter == "S" else None
        mask = torch.stack([allowed(T, window, r if restart is not None else None) for r in rows])[:, None]
        x = x + oracle_attention(
            block.attn, block.attn_norm(x), cfg, mask, pos if cfg.pos_emb == "rope" else None
        )
        x = x + block.ffn(block.ffn_norm(x))
    return model.lm_head(model.final_norm(x))


CASES = {
    "all-local": {"window": 3},
    "SSSL-gqa": {"window": 4, "window_pattern": "SSSL", "n_kv_head": 2},
    "LS-softcap": {"window": 5, "window_pattern": "LS", "attn_softcap": 1.5},
    "SLL-mqa-softcap-learned": {"window": 2, "window_pattern": "SLL", "n_kv_head": 1, "attn_softcap": 2.0,
                                "pos_emb": "learned"},
}  # fmt: skip
DOCS = {"none": None, "restart": "restart", "continue": "continue"}


@pytest.mark.parametrize("docs", DOCS.values(), ids=DOCS.keys())
@pytest.mark.parametrize("extra", CASES.values(), ids=CASES.keys())
def test_model_equals_the_dense_masked_oracle(extra: dict, docs: str | None) -> None:
    """Logits and every gradient in float64, q and k scaled so the logits reach into the cap."""
    torch.manual_seed(0)
    cfg = GPTConfig(**SMALL, **extra)
    model = GPT(cfg, Documents(EOT, docs) if docs else None).double()
    with torch.no_grad():
        for block in model.blocks:
            block.attn.q_proj.weight.mul_(4)
            block.attn.k_proj.weight.mul_(4)
    idx = torch.randint(1, 64, (2, 16))
    if docs:
        idx[0, [4, 9]] = EOT  # three documents, the first cut by the window
        idx[1, [0, 1, 13]] = EOT  # an eot opening the window, two in a row
    gout = torch.randn(2, 16, 64, dtype=torch.float64)
    got = model(idx)
    grads = torch.autograd.grad((got * gout).sum(), list(model.parameters()))
    want = oracle_logits(model, idx, None if docs is None else docs == "restart")
    want_grads = torch.autograd.grad((want * gout).sum(), list(model.parameters()))
    tol = 1e-5  # the model's RoPE tables are float32
    torch.testing.assert_close(got, want, rtol=tol, atol=tol)
    for (name, _), g, w in zip(model.named_parameters(), grads, want_grads, strict=True):
        torch.testing.assert_close(g, w, rtol=tol, atol=tol, msg=lambda m, n=name: f"{n}: {m}")


@pytest.mark.parametrize("pos_emb", ["rope", "learned"])
def test_each_document_alone_gives_the_same_per_token_losses(pos_emb: str) -> None:
    """A packed window of 3 documents (the first cut by the window's start, the others opened by
    their eot) against each run on its own: the same per-token losses (positions restarting)."""
    torch.manual_seed(0)
    model = GPT(GPTConfig(**SMALL, pos_emb=pos_emb), Documents(EOT, "restart")).double()
    window = torch.tensor([[5, 6, 7, EOT, 8, 9, 10, 11, 12, EOT, 13, 14, 15, 16, 17, 18, 19]])
    x, y = window[:, :-1], window[:, 1:]
    packed = F.cross_entropy(model(x)[0], y[0], reduction="none")
    alone = torch.cat(
        [
            F.cross_entropy(model(x[:, a:b])[0], y[0, a:b], reduction="none")
            for a, b in ((0, 3), (3, 9), (9, 16))
        ]
    )
    torch.testing.assert_close(packed, alone, rtol=1e-10, atol=1e-10)
    # not so without the mask: the documents see each other
    model.documents = None
    assert not torch.allclose(F.cross_entropy(model(x)[0], y[0], reduction="none")[3:], alone[3:])


def test_continued_positions_are_the_windows_own() -> None:
    """data.document_positions=continue with learned positions: a later document sees the table's rows
    at its place in the window (the oracle: it alone, through a copy whose table is shifted)."""
    torch.manual_seed(0)
    model = GPT(GPTConfig(**SMALL, pos_emb="learned"), Documents(EOT, "continue")).double()
    x = torch.tensor([[5, 6, 7, EOT, 8, 9, 10, 11]])
    shifted = GPT(GPTConfig(**SMALL, pos_emb="learned")).double()
    shifted.load_state_dict(model.state_dict())
    with torch.no_grad():
        shifted.pos_emb.weight[:-3] = model.pos_emb.weight[3:]
    torch.testing.assert_close(model(x)[:, 3:], shifted(x[:, 3:]), rtol=1e-10, atol=1e-10)


def test_what_the_first_token_after_an_eot_attends_to() -> None:
    """The eot opens its document: it sees itself only; the token after it sees the eot and itself;
    the token before it sees its own document (not the eot)."""
    model = GPT(GPTConfig(**SMALL), Documents(EOT))
    idx = torch.tensor([[5, 6, EOT, 7, 8]])
    same = (model.documents.ids(idx)[:, :, None] == model.documents.ids(idx)[:, None, :])[:, None]
    mask = model._mask(5, None, same, idx.device)[0, 0]
    assert mask[2].tolist() == [False, False, True, False, False]
    assert mask[3].tolist() == [False, False, True, True, False]
    assert mask[1].tolist() == [True, True, False, False, False]
    assert model.documents.position_ids(idx).tolist() == [[0, 1, 0, 1, 2]]


def test_windows_and_documents_compile_without_a_graph_break() -> None:
    """torch.compile(fullgraph=True) equals eager, forward and gradients, with GQA and the cap."""
    torch.manual_seed(0)
    cfg = GPTConfig(**SMALL, window=4, window_pattern="SSSL", n_kv_head=2, attn_softcap=5.0, qk_norm=True)
    model = GPT(cfg, Documents(EOT))
    idx = torch.randint(1, 64, (2, 16))
    idx[:, 6] = EOT
    eager = model(idx)
    eager.square().mean().backward()
    want = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad(set_to_none=True)
    got = torch.compile(model, fullgraph=True, backend="aot_eager")(idx)
    got.square().mean().backward()
    torch.testing.assert_close(got, eager, rtol=1e-5, atol=1e-6)
    for n, p in model.named_parameters():
        torch.testing.assert_close(p.grad, want[n], rtol=1e-4, atol=1e-6, msg=lambda m, n=n: f"{n}: {m}")


def test_flops_count_a_local_layers_window() -> None:
    """6·N + 12·d·Σ keys: T for a global layer (PaLM's full square), W for a local one. The dense
    masked kernel still computes the square: FlopCounterMode sees the global model's count."""
    T, d = SHAPE["block_size"], SHAPE["n_embd"]
    model = GPT(GPTConfig.from_dict({**SHAPE, "n_layer": 4, "window": 16, "window_pattern": "SSSL"}))
    plain = GPT(GPTConfig.from_dict({**SHAPE, "n_layer": 4}))
    assert model.flops_per_token() == 6 * model.num_params(exclude_embedding=True) + 12 * d * (3 * 16 + T)
    assert plain.flops_per_token() - model.flops_per_token() == 12 * d * 3 * (T - 16)
    counted = counted_flops_per_token(model, SDPBackend.MATH)
    assert counted == counted_flops_per_token(plain, SDPBackend.MATH)
    assert counted == pytest.approx(plain.flops_per_token(), rel=0.01)
    wide = GPT(GPTConfig.from_dict({**SHAPE, "window": 10 * T}))  # a window past T is global
    assert wide.flops_per_token() == GPT(GPTConfig.from_dict(SHAPE)).flops_per_token()


BAD = [
    ({"window": 0}, "model.window=0 is not accepted; give a positive integer"),
    ({"window": -3}, "model.window=-3 is not accepted; give a positive integer"),
    (
        {"window": 4, "window_pattern": "SSXL"},
        "model.window_pattern='SSXL' is not accepted; give a non-empty",
    ),
    ({"window": 4, "window_pattern": ""}, "model.window_pattern='' is not accepted; give a non-empty"),
    ({"window_pattern": "SL"}, "model.window_pattern='SL' needs model.window"),
]


@pytest.mark.parametrize(("extra", "message"), BAD, ids=[str(e) for e, _ in BAD])
def test_bad_window_inputs_name_the_field(extra: dict, message: str) -> None:
    with pytest.raises(ValueError) as err:
        GPTConfig(**SMALL, **extra)
    assert str(err.value).startswith(message) and "\n" not in str(err.value)
