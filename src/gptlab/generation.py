"""Sampling from a GPT: temperature, top-k, top-p, streamed one token at a time; generate.py's run."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import torch
from omegaconf import OmegaConf

from gptlab.checkpoints import load_model
from gptlab.model import GPT

log = logging.getLogger("gptlab")


@torch.no_grad()
def sample_tokens(
    model: GPT,
    prompt: list[int],
    max_new_tokens: int,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
    decodable: int | None = None,
) -> Iterator[int]:
    """Yield new token ids one by one; temperature 0 means greedy.

    decodable: the tokenizer's size. A model whose vocabulary is larger (model.vocab_size above the
    tokenizer's, e.g. padded or taken over by init_from) has ids no text maps to; their logits are
    set to -inf, so every id drawn is one the tokenizer can decode (None: every id of the model)."""
    if not prompt:
        raise ValueError("prompt is empty; give at least one character/token")
    device = next(model.parameters()).device
    idx = torch.tensor([prompt], dtype=torch.long, device=device)
    was_training = model.training
    model.eval()
    for _ in range(max_new_tokens):
        logits = model(idx[:, -model.cfg.block_size :])[0, -1].float()
        if decodable is not None and decodable < logits.numel():
            logits[decodable:] = -float("inf")
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


def warn_undecodable(model_vocab: int, tokenizer_size: int) -> None:
    """Say once that a sample draws from fewer ids than the model has, and why."""
    if model_vocab > tokenizer_size:
        log.warning(
            "model.vocab_size=%d is larger than the tokenizer's %d ids: ids %d..%d decode to no text "
            "and are never sampled",
            model_vocab,
            tokenizer_size,
            tokenizer_size,
            model_vocab - 1,
        )


@dataclass
class GenerateConfig:
    """generate.py's arguments."""

    ckpt_path: str = "???"
    prompt: str | None = None  # None: the start of a validation document of the checkpoint's run
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
    prompt = list(tok.encode(cfg.prompt)) if cfg.prompt is not None else run_prompt(cfg.ckpt_path)
    prompt = prompt if prompt is not None else list(tok.encode("\n"))
    gen = torch.Generator(device=cfg.device).manual_seed(cfg.seed)
    settings = (cfg.max_new_tokens, cfg.temperature, cfg.top_k, cfg.top_p)
    warn_undecodable(model.cfg.vocab_size, tok.vocab_size)
    stream = sample_tokens(model, prompt, *settings, gen, decodable=tok.vocab_size)
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


def run_prompt(ckpt_path: str) -> list[int] | None:
    """The first tokens of a validation document of the run that wrote the checkpoint (the run's
    `.hydra/config.yaml`, beside or above the checkpoint's folder), so a sample without a prompt
    continues text like the data; None when the checkpoint has no run directory (an export)."""
    from gptlab.data.config import DataConfig
    from gptlab.data.datamodule import TokenDataModule

    path = Path(ckpt_path).resolve()
    configs = [d / ".hydra" / "config.yaml" for d in (path.parent.parent, path.parent, path)]
    config = next((c for c in configs if c.is_file()), None)
    if config is None:
        log.info("no prompt and no run config beside %s: the sample starts from a newline", ckpt_path)
        return None
    run = OmegaConf.load(config)
    data = OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(DataConfig), run.data))
    return TokenDataModule(data, block_size=int(run.model.block_size), seed=int(run.seed)).sample_prompt()
