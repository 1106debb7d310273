"""Sampling from a GPT: temperature, top-k, top-p, streamed one token at a time; generate.py's run."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TextIO

import torch
from omegaconf import OmegaConf

from gptlab.checkpoints import load_model
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


@dataclass
class GenerateConfig:
    """generate.py's arguments."""

    ckpt_path: str = "???"
    prompt: str = "\n"
    max_new_tokens: int = 200
    temperature: float = 0.8
    top_k: int | None = 50
    top_p: float | None = None
    seed: int = 0
    device: str = "cpu"


def parse_args(argv: list[str]) -> GenerateConfig:
    """generate.py's key=value arguments, typed; the prompt is taken verbatim."""
    # dotlist parsing would strip the prompt's spaces and read YAML in it
    prompts = [a.partition("=")[2] for a in argv if a.startswith("prompt=")]
    rest = [a for a in argv if not a.startswith("prompt=")]
    cfg = OmegaConf.merge(OmegaConf.structured(GenerateConfig), OmegaConf.from_dotlist(rest))
    if prompts:
        cfg.prompt = prompts[-1]
    if OmegaConf.is_missing(cfg, "ckpt_path"):
        raise ValueError("ckpt_path is required: generate.py ckpt_path=<.ckpt file or export dir>")
    return OmegaConf.to_object(cfg)  # type: ignore[return-value]


def generate(cfg: GenerateConfig, out: TextIO) -> None:
    """Sample from the checkpoint, writing text to `out` as whole characters arrive."""
    model, tok = load_model(cfg.ckpt_path, cfg.device)
    prompt = list(tok.encode(cfg.prompt))
    gen = torch.Generator(device=cfg.device).manual_seed(cfg.seed)
    stream = sample_tokens(model, prompt, cfg.max_new_tokens, cfg.temperature, cfg.top_k, cfg.top_p, gen)
    ids = list(prompt)
    shown = tok.decode(ids)
    out.write(shown)
    for token in stream:
        ids.append(token)
        text = tok.decode(ids)
        if not text.endswith("\ufffd"):  # wait for a whole UTF-8 character before printing
            out.write(text[len(shown) :])
            out.flush()
            shown = text
    out.write(tok.decode(ids)[len(shown) :] + "\n")
