"""generate.py: seeded determinism, the three checkpoint forms, greedy and nucleus sampling."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

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
