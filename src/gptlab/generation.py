"""Sampling from a GPT: temperature, top-k, top-p, streamed one token at a time."""

from __future__ import annotations

from collections.abc import Iterator

import torch

from gptlab.model import GPT


@torch.no_grad()
def sample_tokens(
    model: GPT,
    prompt: list[int],
    max_new_tokens: int,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
) -> Iterator[int]:
    """Yield new token ids one by one; temperature 0 means greedy."""
    if not prompt:
        raise ValueError("prompt is empty; give at least one character/token")
    device = next(model.parameters()).device
    idx = torch.tensor([prompt], dtype=torch.long, device=device)
    was_training = model.training
    model.eval()
    for _ in range(max_new_tokens):
        logits = model(idx[:, -model.cfg.block_size :])[0, -1].float()
        if temperature <= 0:
            nxt = int(torch.argmax(logits))
        else:
            logits = logits / temperature
            if top_k is not None and top_k > 0:
                kth = torch.topk(logits, min(top_k, logits.numel())).values[-1]
                logits[logits < kth] = -float("inf")
            probs = torch.softmax(logits, dim=-1)
            if top_p is not None and 0 < top_p < 1:
                sorted_p, order = torch.sort(probs, descending=True)
                keep = torch.cumsum(sorted_p, 0) - sorted_p < top_p  # smallest set with mass >= top_p
                probs = torch.zeros_like(probs).scatter_(0, order[keep], sorted_p[keep])
            nxt = int(torch.multinomial(probs, 1, generator=generator))
        idx = torch.cat([idx, torch.tensor([[nxt]], device=device)], dim=1)
        yield nxt
    model.train(was_training)
