"""A tied model's lm_head.weight *is* tok_emb.weight, however the model is moved or copied."""

from __future__ import annotations

import copy
import io

import pytest
import torch

from gptlab.model import GPT, GPTConfig


def cfg(tie: bool = True, **kw) -> GPTConfig:
    base = dict(vocab_size=64, block_size=16, n_layer=2, n_head=4, n_embd=32, tie_embeddings=tie)
    return GPTConfig(**(base | kw))


def tied(m: GPT) -> bool:
    return m.lm_head.weight is m.tok_emb.weight


def tokens() -> torch.Tensor:
    return torch.randint(0, 64, (2, 16), generator=torch.Generator().manual_seed(0))


def test_tied_after_construction():
    m = GPT(cfg())
    assert tied(m)
    assert "lm_head.weight" not in dict(m.named_parameters())  # counted once
    # an update through the head is an update of the embedding
    with torch.no_grad():
        m.lm_head.weight[3, 5] = 123.0
    assert m.tok_emb.weight[3, 5].item() == 123.0


def test_tied_gradient_accumulates_both_uses():
    m = GPT(cfg())
    m(tokens()).sum().backward()
    assert m.tok_emb.weight.grad is m.lm_head.weight.grad
    # rows of tokens absent from the input still get the head's gradient
    absent = sorted(set(range(64)) - set(tokens().flatten().tolist()))
    assert absent and m.tok_emb.weight.grad[absent].abs().sum() > 0


def test_tied_after_dtype_change():
    m = GPT(cfg()).to(torch.float64)
    assert tied(m) and m.tok_emb.weight.dtype == torch.float64
    m = m.half().float()
    assert tied(m)


def test_tied_after_deepcopy():
    m = GPT(cfg())
    c = copy.deepcopy(m)
    assert tied(c)
    assert c.tok_emb.weight is not m.tok_emb.weight  # a copy, not an alias of the original


def test_state_dict_round_trip_keeps_tying_and_logits():
    torch.manual_seed(0)
    src = GPT(cfg()).eval()
    buf = io.BytesIO()
    torch.save(src.state_dict(), buf)
    buf.seek(0)
    torch.manual_seed(1)
    dst = GPT(cfg()).eval()
    assert not torch.equal(dst.tok_emb.weight, src.tok_emb.weight)
    dst.load_state_dict(torch.load(buf, weights_only=True))
    assert tied(dst)
    with torch.no_grad():
        assert torch.equal(dst(tokens()), src(tokens()))


def test_meta_construction_then_materialise():
    with torch.device("meta"):
        m = GPT(cfg())
    assert tied(m) and m.tok_emb.weight.is_meta
    m.to_empty(device="cpu")
    assert tied(m)
    m.reset_parameters()
    assert tied(m)
    assert m.tok_emb.weight.std().item() == pytest.approx(0.02, rel=0.1)
    # the RoPE tables are recomputed too: to_empty() leaves them as garbage
    assert torch.equal(m.rope_cos[0], torch.ones_like(m.rope_cos[0]))
    logits = m(tokens())
    assert torch.isfinite(logits).all()
    assert m.num_params() == GPT(cfg()).num_params()


@pytest.mark.parametrize(
    "move",
    [
        lambda m: m,
        lambda m: m.to(torch.float64),
        copy.deepcopy,
        lambda m: m.to_empty(device="cpu"),
    ],
    ids=["construct", "to_float64", "deepcopy", "to_empty"],
)
def test_untied_stays_untied(move):
    m = move(GPT(cfg(tie=False)))
    assert not tied(m)
    assert m.lm_head.weight.data_ptr() != m.tok_emb.weight.data_ptr()
    assert "lm_head.weight" in dict(m.named_parameters())
