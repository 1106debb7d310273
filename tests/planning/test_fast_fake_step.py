"""The fake step's two shortcuts measure the bytes of the long way, to the byte: the attention
statistics over two chunks of sequences (planning.step.STAT_CHUNKS) against all of them, and the
planner's device-peak trackers (planning.trackers) against torch's own MemTracker and
FSDPMemTracker. The shape makes the attention statistics the step's peak (a long context on a
narrow model with many heads), so a chunk that mattered would show. (Since the statistics score
causal row blocks, the first chunk's last row block already makes their peak: one chunk would do;
two are kept as the margin for a mask that is not causal.)"""

from __future__ import annotations

import dataclasses

import pytest
from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker
from torch.distributed._tools.mem_tracker import MemTracker

import gptlab.planning.step as step
import gptlab.planning.trackers as trackers
import gptlab.training.callbacks.attention_stats as attention_stats
from gptlab.config import OptimConfig
from gptlab.model import GPTConfig
from gptlab.planning.step import Memory, Setup, measure

T, H = 512, 16
SHAPE = {"n_layer": 1, "n_head": H, "n_embd": 32, "block_size": T, "vocab_size": 64}


def setup(**kw) -> Setup:
    model = GPTConfig.from_dict({**SHAPE, **kw.pop("model", {})})
    kw.setdefault("precision", "32-true")
    return Setup(model, OptimConfig(), kw.pop("micro_batch", 5), device="cpu", **kw)


def same(a: Memory, b: Memory) -> None:
    da, db = dataclasses.asdict(a), dataclasses.asdict(b)
    da.pop("seconds"), db.pop("seconds")
    assert da == db


@pytest.mark.parametrize(
    ("rows", "kw"),
    [
        (1, {}),  # a chunk a sequence, as at T 2048
        (2, {}),  # chunks of 2 over 5 sequences: a short last chunk
        (1, {"model": {"n_kv_head": 2}}),  # grouped-query: the scores per query head
        (2, {"documents": {"eot": 0, "positions": "restart"}}),  # a (B, 1, T, T) mask, sliced per chunk
        (1, {"precision": "bf16-mixed"}),  # bf16 q and k, made fp32 per chunk
    ],
)
def test_two_chunks_measure_what_all_chunks_do(monkeypatch: pytest.MonkeyPatch, rows: int, kw: dict) -> None:
    monkeypatch.setattr(attention_stats, "SCORES_PER_CHUNK", rows * H * T * T)
    s = setup(**kw)
    fast = measure(s)
    monkeypatch.setattr(step, "STAT_CHUNKS", None)
    same(fast, measure(s))
    if not kw:  # fp32, full heads: the statistics make the step's peak, so a chunk that mattered would show
        assert measure(dataclasses.replace(s, attention=False)).peak < fast.peak


@pytest.mark.parametrize("fsdp", [False, True])
def test_device_peak_trackers_measure_what_torchs_do(monkeypatch: pytest.MonkeyPatch, fsdp: bool) -> None:
    s = setup(micro_batch=3, world_size=2 if fsdp else 1, fsdp=fsdp, precision="bf16-mixed")
    fast = measure(s)
    monkeypatch.setattr(trackers, "PeakMemTracker", MemTracker)
    monkeypatch.setattr(trackers, "PeakFSDPMemTracker", FSDPMemTracker)
    same(fast, measure(s))
