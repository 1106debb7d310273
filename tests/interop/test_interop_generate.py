"""generate.py: seeded determinism, the three checkpoint forms, greedy and nucleus sampling."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from torch import Generator

from gptlab.checkpoints import load_checkpoint, load_model
from gptlab.data.tokenizers import ByteTokenizer
from gptlab.generation import sample_tokens
from tests.interop.helpers import load_cli

GENERATE = load_cli("generate.py")
EXPORT = load_cli("scripts/export.py")
PROMPT = "def "


def generate(capsys: pytest.CaptureFixture[str], ckpt: Path, *args: str) -> str:
    """The text generate.py prints for `ckpt` (in-process, so no interpreter start-up per call)."""
    capsys.readouterr()
    assert GENERATE.main([f"ckpt_path={ckpt}", f"prompt={PROMPT}", "max_new_tokens=48", *args]) == 0
    return capsys.readouterr().out


def test_same_seed_same_text_other_seed_other_text(capsys, byte_ckpt: Path) -> None:
    first = generate(capsys, byte_ckpt, "seed=1", "temperature=1.0", "top_k=0")
    again = generate(capsys, byte_ckpt, "seed=1", "temperature=1.0", "top_k=0")
    other = generate(capsys, byte_ckpt, "seed=2", "temperature=1.0", "top_k=0")
    assert first.startswith(PROMPT) and len(first) > len(PROMPT) + 8
    assert first == again
    assert first != other


def test_lightning_consolidated_and_hf_forms_generate_the_same_text(
    capsys, byte_ckpt: Path, tmp_path: Path
) -> None:
    model, spec = load_checkpoint(byte_ckpt)
    consolidated = tmp_path / "consolidated.pt"
    torch.save(
        {"model_config": model.cfg.to_dict(), "state_dict": model.state_dict(), "tokenizer": spec},
        consolidated,
    )
    assert EXPORT.main([f"ckpt_path={byte_ckpt}", f"out_dir={tmp_path / 'hf'}"]) == 0
    assert (tmp_path / "hf" / "config.json").is_file()
    texts = {
        form: generate(capsys, path, "seed=3", "temperature=1.0", "top_k=20")
        for form, path in (
            ("lightning", byte_ckpt),
            ("consolidated", consolidated),
            ("hf", tmp_path / "hf"),
        )
    }
    assert texts["lightning"].startswith(PROMPT)
    assert texts["consolidated"] == texts["lightning"]
    assert texts["hf"] == texts["lightning"]
    # the export shipped the byte tokenizer and loading it back gives bytes again
    _, tok = load_model(tmp_path / "hf")
    assert isinstance(tok, ByteTokenizer)


def test_top_k_1_is_greedy(capsys, byte_ckpt: Path) -> None:
    greedy = generate(capsys, byte_ckpt, "temperature=0")
    top1_a = generate(capsys, byte_ckpt, "temperature=1.0", "top_k=1", "seed=5")
    top1_b = generate(capsys, byte_ckpt, "temperature=1.5", "top_k=1", "seed=6")
    sampled = generate(capsys, byte_ckpt, "temperature=1.0", "top_k=0", "seed=5")
    assert top1_a == greedy and top1_b == greedy
    assert sampled != greedy  # sampling does differ, so the equalities above say something


class FixedLogits(torch.nn.Module):
    """A stand-in model whose next-token distribution is always `probs`."""

    def __init__(self, probs: list[float]) -> None:
        super().__init__()
        self.logits = torch.nn.Parameter(torch.tensor(probs).log())
        self.cfg = SimpleNamespace(block_size=8)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return self.logits.expand(idx.shape[0], idx.shape[1], -1)


@pytest.mark.parametrize(("top_p", "kept"), [(0.7, {0, 1}), (0.9, {0, 1, 2}), (None, {0, 1, 2, 3})])
def test_top_p_keeps_the_smallest_set_with_that_mass(top_p: float | None, kept: set[int]) -> None:
    model = FixedLogits([0.5, 0.3, 0.15, 0.05])
    gen = torch.Generator().manual_seed(0)
    drawn = list(sample_tokens(model, [0], 400, temperature=1.0, top_p=top_p, generator=gen))
    assert set(drawn) == kept


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ([], "ckpt_path is required"),
        (["ckpt_path=nowhere.ckpt"], "ckpt_path='nowhere.ckpt' does not exist"),
    ],
)
def test_generate_errors_are_one_line_and_exit_2(capsys, args: list[str], expected: str) -> None:
    with pytest.raises(SystemExit) as exit_info:
        GENERATE.main(args)
    assert exit_info.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0]


def _reference_sample(
    model: torch.nn.Module, prompt: list[int], n: int, temperature: float, top_k: int | None, gen: Generator
) -> list[int]:
    """The textbook loop: the whole text's last block_size tokens through model(idx), the last
    position's logits, top-k, softmax, torch.multinomial (argmax at temperature 0)."""
    idx = torch.tensor([prompt])
    with torch.no_grad():
        for _ in range(n):
            logits = model(idx[:, -model.cfg.block_size :])[0, -1]
            if temperature == 0:
                nxt = logits.argmax().view(1)
            else:
                logits = logits / temperature
                if top_k:
                    logits = logits.masked_fill(logits < torch.topk(logits, top_k).values[-1], -torch.inf)
                nxt = torch.multinomial(torch.softmax(logits, -1), 1, generator=gen)
            idx = torch.cat([idx, nxt.view(1, 1)], dim=1)
    return idx[0, len(prompt) :].tolist()


@pytest.mark.parametrize(("temperature", "top_k"), [(0.8, 50), (1.0, None), (0.0, None)])
def test_a_seeded_sample_is_the_reference_loops(temperature: float, top_k: int | None) -> None:
    """sample_tokens (the run's end and generate.py) draws what the plain loop draws with the same
    generator, token for token, also after the text outgrows block_size and the window slides."""
    from gptlab.model import GPT
    from gptlab.model.config import GPTConfig

    torch.manual_seed(0)
    cfg = GPTConfig(vocab_size=64, block_size=16, n_layer=2, n_head=2, n_embd=32, pos_emb="learned")
    model = GPT(cfg).eval()
    with torch.no_grad():  # larger weights than the init's: even the greedy text varies with its context
        for p in model.parameters():
            p.normal_(0.0, 0.5)
    prompt = [3, 1, 4, 1, 5]
    gen = torch.Generator().manual_seed(7)
    ours = list(sample_tokens(model, prompt, 40, temperature, top_k, generator=gen))
    ref = _reference_sample(model, prompt, 40, temperature, top_k, torch.Generator().manual_seed(7))
    assert ours == ref
    assert len(set(ours)) > 3  # a text, not one id repeated: the comparison says something
