"""docs/performance.md's sizing table re-derived from its own columns and the paper's formula, with
every model's parameters counted here by hand from its published shape (not by gptlab's code): the
step time is the step's model FLOPs, (6·N + 12·L·T·d) per token (PaLM, Chowdhery et al. 2022,
appendix B; N without the lookup tables) times 4/3 with full checkpointing, over the devices' dense
bf16 peak (989.4 TFLOP/s for an H100 SXM or an H200, NVIDIA's datasheets) times the row's MFU; its
tokens/s and time to 10B tokens follow. A row edited by hand, or a planner whose speed formula drifts
from the paper's, fails here."""

from __future__ import annotations

from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "performance.md"
T = 2048
PEAK = 989.4e12


def llama_blocks(layers: int, d: int, ffn: int) -> int:
    """The blocks' parameters alone (attention, SwiGLU, two RMSNorm gains each): what telemetry copies
    before a log step's update."""
    return layers * (4 * d * d + 3 * d * ffn + 2 * d)


def llama(layers: int, d: int, ffn: int, vocab: int, tied: bool) -> tuple[int, int, int]:
    """(all parameters, N, layers·d) of a pre-RMSNorm SwiGLU stack without biases."""
    blocks = llama_blocks(layers, d, ffn) + d
    table = vocab * d
    total = blocks + table + (0 if tied else table)
    return total, total - (0 if tied else table), layers * d


def gpt2(layers: int, d: int, vocab: int) -> tuple[int, int, int]:
    """GPT-2: biases on every linear, LayerNorm (gain and bias), learned positions, tied head."""
    blocks = layers * (12 * d * d + 13 * d + 4 * d) + 2 * d
    total = blocks + vocab * d + T * d
    return total, total - T * d, layers * d


SHAPES = {
    "gpt2-124M": gpt2(12, 768, 50257),
    "llama-125M": llama(12, 768, 2048, 32000, tied=True),  # 8/3·768 = 2048
    "llama-350M": llama(24, 1024, 2816, 32000, tied=False),  # 8/3·1024 rounded up to 256s
    "llama-1B": llama(22, 2048, 5632, 32000, tied=False),  # TinyLlama 1.1B's shape
    "llama-7B": llama(32, 4096, 11008, 32000, tied=False),  # Llama 2 7B
}


def table_rows() -> list[dict[str, str]]:
    text = DOC.read_text()
    block = text[text.index("### Sizing table") :]
    all_lines = block.splitlines()
    first = next(i for i, line in enumerate(all_lines) if line.startswith("| model |"))
    lines = []
    for line in all_lines[first:]:
        if not line.startswith("|"):
            break
        if not line.startswith("|---"):
            lines.append(line)
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    return [
        dict(zip(head, (c.strip() for c in line.strip("|").split("|")), strict=True)) for line in lines[1:]
    ]


def hours(cell: str) -> float:
    value, unit = cell.split()
    return float(value) * (24 if unit == "days" else 1)


def test_the_table_has_every_model_setup_and_mode() -> None:
    rows = table_rows()
    assert {(r["model"], r["GPUs"], r["activation checkpointing"]) for r in rows} == {
        (m, g, ac) for m in SHAPES for g in ("1×H200", "8×H100 SXM (FSDP2)") for ac in ("none", "full")
    }


@pytest.mark.parametrize(
    "row", table_rows(), ids=lambda r: f"{r['model']}-{r['GPUs']}-{r['activation checkpointing']}"
)
def test_each_row_follows_from_the_formula(row: dict[str, str]) -> None:
    total, n, layers_d = SHAPES[row["model"]]
    assert row["params"] == f"{total / 1e6:,.0f}M"
    devices = 8 if row["GPUs"].startswith("8×") else 1
    usable_gib = (141 if row["GPUs"] == "1×H200" else 80) * 0.79
    if row["micro-batch that fits"] == "none (1 needs more)":
        # a telemetry log step's update holds fp32 weights, gradients, AdamW's two moments (16 bytes
        # a parameter) and the copy of the blocks' weights telemetry takes before it (4 more bytes
        # a block parameter): more than the GPU has
        assert row["model"] == "llama-7B", "only llama-7B on one H200 is planned not to fit"
        cell = row["peak / device (GiB)"].replace(" at 1 (of ", " ").rstrip(")")
        peak, usable = (float(x) for x in cell.split())
        assert peak >= (16 * total + 4 * llama_blocks(32, 4096, 11008)) / devices / 2**30 - 0.05
        assert peak > usable
        assert usable == pytest.approx(usable_gib, abs=0.051)
        assert {row[c] for c in ("step time", "tokens/s", "10B tokens", "MFU")} == {"—"}
        return
    micro = int(row["micro-batch that fits"])
    mfu = float(row["MFU"].split()[0])
    recompute = 4 / 3 if row["activation checkpointing"] == "full" else 1.0
    tokens = micro * T * devices
    step = tokens * (6 * n + 12 * layers_d * T) * recompute / (devices * PEAK * mfu)
    assert float(row["step time"].removesuffix(" s")) == pytest.approx(step, abs=0.0051)
    tokens_per_sec = tokens / step
    assert float(row["tokens/s"].replace(",", "")) == pytest.approx(tokens_per_sec, rel=1e-3)
    assert hours(row["10B tokens"]) == pytest.approx(
        10e9 / tokens_per_sec / 3600, abs=0.051 * (24 if "days" in row["10B tokens"] else 1)
    )
    peak, usable = (float(x) for x in row["peak / device (GiB)"].replace("(of ", "").rstrip(")").split())
    # gptlab.hardware counts an "80GB" H100 as 80 GiB (CUDA reports 79.6 GiB for it); the table was
    # planned at the planner's 21% headroom
    assert peak <= usable
    assert usable == pytest.approx(usable_gib, abs=0.051)
