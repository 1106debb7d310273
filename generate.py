"""Sample from a trained model, streaming to stdout.

python generate.py ckpt_path=outputs/.../checkpoints/last.ckpt prompt='def ' max_new_tokens=200 \
    temperature=0.8 top_k=50 [top_p=0.95] [seed=0] [device=cpu]
ckpt_path may be a Lightning checkpoint, a consolidated FSDP checkpoint or an exported HF directory.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from omegaconf import OmegaConf


@dataclass
class GenerateConfig:
    ckpt_path: str = "???"
    prompt: str = "\n"
    max_new_tokens: int = 200
    temperature: float = 0.8
    top_k: int | None = 50
    top_p: float | None = None
    seed: int = 0
    device: str = "cpu"


def main(argv: list[str]) -> int:
    import torch

    from gptlab.checkpoints import load_model
    from gptlab.errors import USER_ERRORS, exit_with
    from gptlab.generation import sample_tokens

    try:
        # the prompt is taken verbatim: dotlist parsing would strip its spaces and read YAML in it
        prompts = [a.partition("=")[2] for a in argv if a.startswith("prompt=")]
        rest = [a for a in argv if not a.startswith("prompt=")]
        cfg = OmegaConf.merge(OmegaConf.structured(GenerateConfig), OmegaConf.from_dotlist(rest))
        if prompts:
            cfg.prompt = prompts[-1]
        if OmegaConf.is_missing(cfg, "ckpt_path"):
            raise ValueError("ckpt_path is required: generate.py ckpt_path=<.ckpt file or export dir>")
        model, tok = load_model(cfg.ckpt_path, cfg.device)
        prompt = list(tok.encode(cfg.prompt))
        gen = torch.Generator(device=cfg.device).manual_seed(cfg.seed)
        stream = sample_tokens(model, prompt, cfg.max_new_tokens, cfg.temperature, cfg.top_k, cfg.top_p, gen)
        ids = list(prompt)
        shown = tok.decode(ids)
        sys.stdout.write(shown)
        for token in stream:
            ids.append(token)
            text = tok.decode(ids)
            if not text.endswith("\ufffd"):  # wait for a whole UTF-8 character before printing
                sys.stdout.write(text[len(shown) :])
                sys.stdout.flush()
                shown = text
        sys.stdout.write(tok.decode(ids)[len(shown) :] + "\n")
    except USER_ERRORS as err:
        exit_with(err)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
