"""The planner's verdicts recomputed from outside its code (issue 37, §6): a GPU's memory as its vendor
publishes it (written out here, not read from gptlab.hardware), less the documented headroom
(docs/performance.md: usable = memory × (1 − plan.headroom)), against the measured peak; and
bf16-true's bytes per parameter from the dtype itself (torch.bfloat16's itemsize).

A tiny model's peak is well under a MiB, so a headroom close to 1 moves the usable memory across it:
the verdict then turns on the headroom alone, and a headroom that is not used shows."""

from __future__ import annotations

import re

import pytest
import torch

from gptlab.config import OptimConfig
from gptlab.hardware import GPUS
from gptlab.model import GPT, GPTConfig
from gptlab.planning.cli import main
from gptlab.planning.plan import alternatives, plan
from gptlab.planning.step import Setup, measure
from tests.planning.test_plan_cli import TINY  # the same one-layer model the CLI tests plan

GIB, MIB = 2**30, 2**20
# memory in GiB as the vendors' data sheets give it
PUBLISHED = {
    "H200": 141,
    "H200 NVL": 141,
    "H100 SXM": 80,
    "H100 PCIe": 80,
    "H100 NVL": 94,
    "A100 80GB": 80,
    "A100 40GB": 40,
    "L40S": 48,
    "RTX 4090": 24,
    "RTX 3090": 24,
}
SHAPE = {"n_layer": 1, "n_head": 4, "n_embd": 48, "block_size": 32, "vocab_size": 96}


def mib(text: str) -> float:
    """A size as report.gib prints it, in MiB."""
    value, unit = text.split()
    return float(value) * (1024 if unit == "GiB" else 1)


def test_the_listed_gpus_are_the_published_memory_sizes() -> None:
    assert {name: g.memory_gib for name, g in GPUS.items()} == PUBLISHED


@pytest.mark.parametrize("headroom", [1 - 2**-16, 1 - 2**-12])
def test_plan_headroom_on_the_command_line_decides_the_verdict(
    capsys: pytest.CaptureFixture[str], headroom: float
) -> None:
    """On an RTX 4090 (24 GiB) at headroom 1 − 2⁻¹⁶ 0.375 MiB are usable, under the tiny peak
    (does NOT fit); at 1 − 2⁻¹² 6 MiB are (fits): the verdict is peak ≤ 24 GiB × (1 − headroom)."""
    assert main([*TINY, "data.batch_size=1", "plan.gpu=RTX 4090", f"plan.headroom={headroom!r}"]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("memory     "))
    m = re.search(r"(fits|does NOT fit): peak (\S+ \S+) of (\S+ \S+) usable on a RTX 4090", line)
    assert m is not None, line
    usable = PUBLISHED["RTX 4090"] * GIB * (1 - headroom)
    assert mib(m.group(3)) == pytest.approx(usable / MIB, abs=0.05)
    peak = mib(m.group(2)) * MIB
    assert abs(peak - usable) > 0.1 * MIB  # far from the line: the printed rounding cannot decide it
    assert m.group(1) == ("fits" if peak <= usable else "does NOT fit")
    assert ("what would fit" in out) == (peak > usable)


def test_a_gpu_it_fits_as_it_is_has_the_peak_within_its_usable_memory() -> None:
    """Headroom chosen so the usable memory is peak × size / 44 GiB: an A100 40GB (40/44 of the
    peak) does not hold it, though its whole memory would; the smallest listed GPU whose usable
    memory holds it is the one offered (an L40S, 48 GiB)."""
    setup = Setup(GPTConfig.from_dict(SHAPE), OptimConfig(), 1)
    peak = measure(setup).peak
    headroom = 1 - peak / (44 * GIB)
    p = plan(setup, GPUS["A100 40GB"], None, headroom)
    assert not p.fits
    expected = min(
        (
            name
            for name, gib in PUBLISHED.items()
            if peak <= gib * GIB * (1 - headroom) and name != "A100 40GB"
        ),
        key=lambda name: PUBLISHED[name],
    )
    assert expected == "L40S"
    moved = [a for a in alternatives(p, None, headroom) if a.what.startswith("a GPU it fits as it is")]
    assert [a.what for a in moved] == [f"a GPU it fits as it is: {expected}"]
    assert moved[0].plan.usable == pytest.approx(PUBLISHED[expected] * GIB * (1 - headroom), abs=1)
    assert moved[0].plan.fits


def test_bf16_true_plans_two_bytes_per_parameter_for_weights_gradients_and_adamw_moments() -> None:
    """bf16-true runs the whole model in bf16 (Lightning casts the module): parameters, gradients and
    AdamW's two moments (created like the parameter) take torch.bfloat16's itemsize each, plus one
    fp32 step count per tensor; with accumulation the first micro-batch's gradients are alive at
    the peak. 32-true for comparison: float32's itemsize."""
    model_cfg = GPTConfig.from_dict({**SHAPE, "tie_embeddings": False})
    model = GPT(model_cfg)
    n, tensors = model.num_params(), len(list(model.parameters()))
    for precision, dtype in (("bf16-true", torch.bfloat16), ("32-true", torch.float32)):
        m = measure(Setup(model_cfg, OptimConfig(), 2, accumulate=2, precision=precision))
        size = dtype.itemsize
        assert (m.parameters, m.gradients) == (size * n, size * n), precision
        assert m.optimizer == 2 * size * n + torch.float32.itemsize * tensors, precision


@pytest.mark.parametrize("headroom", ["1", "1.0", "-0.1"])
def test_a_headroom_outside_zero_to_one_is_refused_in_one_line(
    capsys: pytest.CaptureFixture[str], headroom: str
) -> None:
    """usable = memory × (1 − headroom): at 1 nothing is usable, below 0 more than the GPU has."""
    with pytest.raises(SystemExit) as info:
        main([*TINY, "plan.gpu=H200", f"plan.headroom={headroom}"])
    assert info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "plan.headroom=" in err and "[0, 1)" in err, err
