"""The planner against things that do not share its code: the same torch tracker over a plain
PyTorch training step on real tensors, AdamW's state by formula, FSDP2's dim-0 sharding by formula,
torch's FlopCounterMode, and the model's own parameter count."""

from __future__ import annotations

import contextlib
import dataclasses
import math
from collections import Counter
from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F
from torch.distributed._tools.mem_tracker import MemTracker
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from gptlab.config import OptimConfig, TrainConfig, TrainerConfig
from gptlab.hardware import GPU
from gptlab.model import GPT, GPTConfig
from gptlab.model.masks import Documents
from gptlab.planning.plan import GIB, alternatives, fits_nowhere, fsdp_refusal, largest_micro_batch, plan
from gptlab.planning.report import format_alternatives, format_plan
from gptlab.planning.step import PARTS, Memory, Setup, measure, split
from gptlab.training.optim import build_optimizer, is_muon_param

SHAPE = {"n_layer": 1, "n_head": 4, "n_embd": 48, "block_size": 32, "vocab_size": 96}
OPTIM = OptimConfig()


def cfg(**kw) -> GPTConfig:
    return GPTConfig.from_dict({**SHAPE, **kw})


def oracle_step(
    model_cfg: GPTConfig,
    B: int,
    accumulate: int,
    precision: str,
    make_opt: Callable[[torch.nn.Module], torch.optim.Optimizer] | None = None,
    documents: Documents | None = None,
) -> dict[str, int]:
    """A plain training step on real tensors, written here in Lightning's order: the optimizer's
    state made by a first step whose gradients stay (Lightning sets them to None between the next
    step's first forward and its backward), then `accumulate` micro-batches (at most 2: the
    gradients of the first stay alive from the second on), clipping, the update; MemTracker's
    peak split by the planner's parts.
    `make_opt`: the optimizer (default: torch's fused AdamW over every parameter); `documents`: the
    model masks documents (data.document_mask)."""
    torch.manual_seed(0)
    model = GPT(model_cfg, documents)
    if make_opt is None:
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True)
    else:
        opt = make_opt(model)
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    opt.step()
    T, V = model_cfg.block_size, model_cfg.vocab_size
    batch = torch.randint(0, V, (B, T + 1))
    amp = (
        torch.autocast("cpu", dtype=torch.bfloat16) if precision == "bf16-mixed" else contextlib.nullcontext()
    )
    tracker = MemTracker()
    tracker.track_external(model, opt, batch)
    with tracker:
        for i in range(min(accumulate, 2)):
            tracker.reset_mod_stats()
            with amp:  # the logits die with the expression, as in the module's _loss
                loss = F.cross_entropy(model(batch[:, :-1]).float().reshape(-1, V), batch[:, 1:].reshape(-1))
            if i == 0:
                opt.zero_grad(set_to_none=True)
            (loss / accumulate).backward()
            del loss
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, foreach=True)
        opt.step()
        opt.zero_grad(set_to_none=True)
    (snap,) = tracker.get_tracker_snapshot("peak").values()
    return split(snap)


CASES = {
    "bf16": (cfg(), 4, 1, "bf16-mixed"),
    "fp32_accumulate": (cfg(tie_embeddings=False), 3, 2, "32-true"),
    "bf16_checkpointed": (cfg(n_layer=2, activation_checkpointing="full"), 4, 1, "bf16-mixed"),
    "gqa_bf16": (cfg(n_kv_head=2), 4, 1, "bf16-mixed"),
    "mqa_fp32_accumulate": (cfg(n_kv_head=1, n_layer=2), 3, 2, "32-true"),
    # issue 46: W_g's weights and gates, and the soft-capped path's explicit T×T scores
    "gated_capped_bf16": (
        cfg(attn_gate="elementwise", attn_softcap=30.0, logit_softcap=20.0),
        4,
        1,
        "bf16-mixed",
    ),
    "headwise_partial_nope_fp32": (
        cfg(n_layer=2, attn_gate="headwise", rope_fraction=0.5, nope_every=2),
        3,
        1,
        "32-true",
    ),
    # issue 46: model.window's masks (one cached (T, T) bool per window), a local/global pattern
    "windowed_sssl_bf16": (cfg(window=8, window_pattern="SSSL"), 4, 1, "bf16-mixed"),
}


_FAKE: dict[object, Memory] = {}


def fake_step(key: object, setup: Setup) -> Memory:
    """measure(setup), once per module for each key: several tests read the same plan of one setup."""
    if key not in _FAKE:
        _FAKE[key] = measure(setup)
    return _FAKE[key]


def case_setup(case: str) -> Setup:
    """The plan's side of a CASES row: a CPU step (the oracle runs on this CPU), no log step."""
    model_cfg, B, acc, precision = CASES[case]
    return Setup(model_cfg, OPTIM, B, accumulate=acc, precision=precision, device="cpu", log_step=False)


@pytest.mark.parametrize("case", CASES)
def test_fake_step_measures_what_a_real_step_allocates(case: str) -> None:
    """Fake tensors (the plan) and real ones (the oracle's own loop) give the same peak and the
    same split, part by part: the fake step allocates what the real step allocates. The oracle
    runs on this CPU, so the plan is of a CPU step (device="cpu": norms as CPU runs them)."""
    model_cfg, B, acc, precision = CASES[case]
    fake = fake_step(case, case_setup(case))
    real = oracle_step(model_cfg, B, acc, precision)
    for part in (*PARTS, "peak"):
        assert fake.part(part) == pytest.approx(real[part], rel=0.01, abs=1024), part
    assert sum(fake.part(p) for p in PARTS) == fake.peak


@pytest.mark.parametrize("case", ["bf16", "windowed_sssl_bf16"])
def test_fake_step_plans_the_document_mask(case: str) -> None:
    """data.document_mask: each forward builds a (B, 1, T, T) same-document mask (and restarted
    positions); the plan of the windowed case with documents allocates what the real step does,
    and more than the same step without documents."""
    model_cfg, B, acc, precision = CASES[case]
    record = {"eot": 0, "positions": "restart"}
    setup = case_setup(case)
    fake = measure(dataclasses.replace(setup, documents=record))
    real = oracle_step(model_cfg, B, acc, precision, documents=Documents(**record))
    for part in (*PARTS, "peak"):
        assert fake.part(part) == pytest.approx(real[part], rel=0.01, abs=1024), part
    assert fake.peak > fake_step(case, setup).peak  # the same step without documents


def test_setup_from_carries_the_document_mask() -> None:
    from gptlab.compose import compose_config
    from gptlab.planning.options import setup_from

    assert setup_from(compose_config(["data.document_positions=continue"])).documents is None
    cfg = compose_config(["data.document_mask=true", "data.document_positions=continue"])
    assert setup_from(cfg).documents == {"eot": 0, "positions": "continue"}


def test_adamw_state_is_two_fp32_moments_per_parameter() -> None:
    """AdamW keeps exp_avg and exp_avg_sq in fp32 (8 bytes per parameter) and a step count per
    tensor; parameters are fp32 masters under bf16 autocast; with accumulation the first
    micro-batch's gradients (4 bytes per parameter) are alive at the peak."""
    model_cfg = cfg(tie_embeddings=False)
    m = measure(Setup(model_cfg, OPTIM, 2, accumulate=2))
    model = GPT(model_cfg)
    n, tensors = model.num_params(), len(list(model.parameters()))
    assert m.optimizer == 8 * n + 4 * tensors
    assert m.parameters == 4 * n
    assert m.gradients == 4 * n


MUON = OptimConfig(name="muon")
TEST_GPU = GPU("test", 80, 1e15, 1e15, 1e15)


def built_state_bytes(model_cfg: GPTConfig, optim: OptimConfig, dtype: torch.dtype) -> int:
    """The oracle: gptlab's own optimizer built on a real model and stepped once on real
    gradients; the bytes of its state tensors, summed with torch."""
    torch.manual_seed(0)
    model = GPT(model_cfg).to(dtype)
    opt = build_optimizer(model, optim, "cpu")
    batch = torch.randint(0, model_cfg.vocab_size, (2, model_cfg.block_size + 1))
    model(batch[:, :-1]).float().logsumexp(-1).mean().backward()
    opt.step()
    return sum(t.numel() * t.element_size() for st in opt.state.values() for t in st.values())


@pytest.mark.parametrize(
    ("name", "precision"), [("adamw", "bf16-mixed"), ("muon", "bf16-mixed"), ("muon", "bf16-true")]
)
def test_planned_optimizer_state_is_the_built_optimizers(name: str, precision: str) -> None:
    """The plan's optimizer part is the state of the optimizer the run builds: AdamW's two moments
    and step count per parameter, or under optim=muon one momentum buffer per hidden matrix (in the
    parameters' dtype: bf16 under bf16-true) and AdamW's state on the rest; the plan says which."""
    model_cfg = cfg(tie_embeddings=False)
    optim = OptimConfig(name=name)
    p = plan(Setup(model_cfg, optim, 2, precision=precision), TEST_GPU)
    dtype = torch.bfloat16 if precision == "bf16-true" else torch.float32
    assert p.memory.optimizer == built_state_bytes(model_cfg, optim, dtype)
    assert f"\noptimizer  {name}: " in format_plan(p)


def test_a_peak_inside_muons_step_is_the_real_steps() -> None:
    """A short batch on wide matrices puts the peak inside Muon's step (every gradient alive). The
    fake step's peak is the real step's (the oracle's loop with gptlab's optimizer); the optimizer
    part is the state alone and the step's transients are temporaries, by BatchedMuon's code
    (training/muon.py), which updates k same-shape A × B matrices as one stack, in place on two
    float32 stacked copies (the blend of gradients and momentum, 2 · 4·k·A·B bytes): inside
    Newton–Schulz the bfloat16 iterate and its successor (2 · 2·k·A·B), the Gram products and their
    polynomial (2 · 2·k·min(A, B)²) and the k bfloat16 norms (2·k) are alive beside them. The largest
    stack's 12·k·A·B + 4·k·min(A, B)² + 2·k bytes. (torch's one-matrix Muon: 8·A·B + 4·min(A, B)².)"""
    model_cfg = cfg(n_embd=256, block_size=8)
    fake = measure(Setup(model_cfg, MUON, 1, precision="32-true", device="cpu", log_step=False))
    real = oracle_step(model_cfg, 1, 1, "32-true", lambda m: build_optimizer(m, MUON, "cuda"))
    assert fake.peak == pytest.approx(real["peak"], rel=0.01)
    model = GPT(model_cfg)
    shapes = Counter(tuple(p.shape) for n, p in model.named_parameters() if is_muon_param(n))
    k, (a, b) = max(((k, shape) for shape, k in shapes.items()), key=lambda ks: ks[0] * math.prod(ks[1]))
    assert k > 1  # a real stack: the model repeats a shape
    assert fake.optimizer == built_state_bytes(model_cfg, MUON, torch.float32)
    assert fake.temporaries == 12 * k * a * b + 4 * k * min(a, b) ** 2 + 2 * k
    assert fake.activations < fake.temporaries  # the peak is the step's, not the forward's


def test_muon_under_fsdp_is_refused_in_trainings_words() -> None:
    """Training refuses optim=muon with FSDP2; the planner refuses that setup in the same line, and a
    muon plan that fits nowhere offers no FSDP2 alternative and says why."""
    with pytest.raises(ValueError) as trained:
        TrainConfig(optim=MUON, trainer=TrainerConfig(strategy="fsdp"))
    with pytest.raises(ValueError) as planned:
        Setup(cfg(), MUON, 1, world_size=2, fsdp=True)
    assert str(planned.value) == str(trained.value)
    s = Setup(cfg(activation_checkpointing="full"), MUON, 1)  # nothing smaller to try
    p = plan(s, GPU("test", 1e-6, 1e15, 1e15, 1e15))
    alts = alternatives(p, None, 0.1)
    assert alts and not any("trainer=fsdp" in a.overrides for a in alts)
    assert f"  FSDP2 not tried: {trained.value}" in format_alternatives(alts, fsdp_refusal(s))
    assert "trainer=fsdp" not in fits_nowhere(
        dataclasses.replace(p, memory=dataclasses.replace(p.memory, peak=2**60))
    )


@pytest.mark.parametrize("device", ["cuda", "cpu"])
@pytest.mark.parametrize("n_kv_head", [2, 1], ids=["gqa", "mqa"])
def test_fewer_kv_heads_plan_k_and_v_at_their_own_width(n_kv_head: int, device: str) -> None:
    """Against multi-head attention, by formula: k_proj and v_proj lose 2·d·(d - n_kv_head·d_h)
    parameters a block (fp32 weights: 4 bytes, AdamW's moments: 8, and the previous step's fp32
    gradients, alive through the forward's peak as Lightning keeps them: 4), and SDPA keeps k and v for its
    backward at n_kv_head heads (no repeated copy): 2·B·T·(d - n_kv_head·d_h) fp32 values a block
    fewer activations; nothing else moves."""
    L, B, d, T = 2, 8, 256, 64
    shape = {"n_layer": L, "n_head": 8, "n_embd": d, "block_size": T}
    mha, gqa = (
        fake_step(
            ("kv", device, kv),
            Setup(cfg(**shape, n_kv_head=kv), OPTIM, B, precision="32-true", device=device, log_step=False),
        )
        for kv in (None, n_kv_head)
    )  # multi-head attention's plan measured once per device, for both parametrizations
    lost = d - n_kv_head * d // 8
    assert mha.parameters - gqa.parameters == 4 * L * 2 * d * lost
    assert mha.optimizer - gqa.optimizer == 8 * L * 2 * d * lost
    assert mha.gradients - gqa.gradients == 4 * L * 2 * d * lost
    assert mha.activations - gqa.activations == 4 * L * 2 * B * T * lost
    for part in ("temporaries", "other"):
        assert mha.part(part) == gqa.part(part), part


def test_fsdp_shards_per_device_as_dim0_chunks() -> None:
    """FSDP2 over 4 fake ranks: rank 0 holds ceil(rows/4) rows of every parameter (dim-0
    chunks), and its parameters and AdamW state are that share; the whole-model count is the
    model's own."""
    model_cfg = cfg(tie_embeddings=False)
    ws = 4
    gpu = GPU("test", 80, 1e15, 1e15, 1e15)
    p = plan(Setup(model_cfg, OPTIM, 2, world_size=ws, fsdp=True), gpu)
    model = GPT(model_cfg)
    shard = sum(math.ceil(q.shape[0] / ws) * q[0].numel() for q in model.parameters())
    assert sum(p.params_device.values()) == shard
    assert p.total_params == model.num_params()
    tensors = len(list(model.parameters()))
    assert p.memory.optimizer == 8 * shard + 4 * tensors
    single = plan(Setup(model_cfg, OPTIM, 2), gpu)
    assert sum(single.params_device.values()) == model.num_params()


def test_fsdp_clipping_costs_no_more_than_its_norms() -> None:
    """Clipping allocates one norm per gradient and a coefficient: a few bytes each, on a GPU as
    here. 4 blocks on a short sequence over 8 fake ranks (each FSDP2 unit's transient buffers are
    a quarter of the model, its activations tiny): the peak with clipping is the peak without, give
    or take those scalars. The planner's first
    version counted DTensor's sharding propagation of the first clip, which runs on fake tensors
    of the global shape, as if it were allocated: the whole model in fp32 on every rank (4× one
    unit's buffers here; mutant plan_clip_propagation_counted)."""
    wide = cfg(n_embd=128, n_head=4, block_size=8, vocab_size=64, n_layer=4)
    gpu = GPU("test", 80, 1e15, 1e15, 1e15)
    setup = Setup(wide, OPTIM, 1, world_size=8, fsdp=True, precision="32-true")
    clipped = measure(setup)
    unclipped = measure(setup.replace(optim=dataclasses.replace(OPTIM, grad_clip=0.0)))
    tensors = len(list(GPT(wide).parameters()))
    whole_model = 4 * GPT(wide).num_params()
    assert abs(clipped.peak - unclipped.peak) <= 64 * tensors < whole_model / 100, (clipped, unclipped)
    assert plan(setup, gpu).memory.peak == clipped.peak


def test_flops_per_step_match_the_flop_counter() -> None:
    """The plan's FLOPs per step (GPT.flops_per_token × tokens per step, accumulation and devices
    included) against FlopCounterMode over the same micro-batches (math SDPA: the CPU flash kernel
    is invisible to the counter, tests/model/test_flops.py)."""
    model_cfg = cfg(n_layer=2)
    B, acc, ws = 2, 3, 2
    p = plan(
        Setup(model_cfg, OPTIM, B, accumulate=acc, world_size=ws), GPU("test", 80, 1e15, 1e15, 1e15), mfu=0.5
    )
    model = GPT(model_cfg)
    T, V = model_cfg.block_size, model_cfg.vocab_size
    counter = FlopCounterMode(display=False)
    with sdpa_kernel(SDPBackend.MATH), counter:
        for _ in range(acc * ws):  # every device's micro-batches
            idx = torch.randint(0, V, (B, T + 1))
            logits = model(idx[:, :-1])
            F.cross_entropy(logits.reshape(-1, V), idx[:, 1:].reshape(-1)).backward()
    assert p.speed is not None
    assert p.speed.flops_per_step == pytest.approx(counter.get_total_flops(), rel=0.02)
    # and the time at that MFU: FLOPs over (devices × peak × MFU)
    assert p.speed.step_time == pytest.approx(p.speed.flops_per_step / (ws * 1e15 * 0.5))


@pytest.mark.slow  # ~15 s on the loaded 2-core machine: a dozen fake steps
def test_alternatives_are_planned_again() -> None:
    """A GPU just too small for the setup: checkpointing is offered with the peak a real
    checkpointed step has (the oracle's loop), not a scaled guess, and a smaller micro-batch
    with accumulation keeps the tokens per step."""
    model_cfg = cfg(n_layer=2)
    s = Setup(model_cfg, OPTIM, 8, device="cpu", log_step=False)  # the oracle's loop runs on this CPU
    selective = dataclasses.replace(model_cfg, activation_checkpointing="selective")  # block 0 of 2
    ckpt = oracle_step(selective, 8, 1, "bf16-mixed")
    base = measure(s)
    assert ckpt["peak"] < base.peak
    room = (ckpt["peak"] + base.peak) / 2  # between the two: only checkpointing (or less) fits
    gpu = GPU("test", room / GIB / 0.9, 1e15, 1e15, 1e15)
    p = plan(s, gpu, headroom=0.1)
    assert not p.fits
    alts = {a.overrides: a for a in alternatives(p, None, 0.1)}
    ac = alts[("model.activation_checkpointing=selective",)]
    assert ac.plan.memory.peak == pytest.approx(ckpt["peak"], rel=0.01)
    assert ac.plan.fits
    smaller = [a for a in alts.values() if a.overrides[0].startswith("data.batch_size=")]
    assert smaller, "a smaller micro-batch fits and is offered"
    a = smaller[0]
    assert a.plan.fits and a.plan.setup.micro_batch < 8
    assert a.plan.setup.tokens_per_step == s.tokens_per_step
    real = oracle_step(model_cfg, a.plan.setup.micro_batch, a.plan.setup.accumulate, "bf16-mixed")
    assert a.plan.memory.peak == pytest.approx(real["peak"], rel=0.01)


@pytest.fixture(scope="module")
def batch_peaks() -> dict[int, int]:
    """Brute force: the fake step's peak at every micro-batch 1..8 of a 1-block model."""
    return {b: measure(Setup(cfg(), OPTIM, b)).peak for b in range(1, 9)}


@pytest.mark.slow  # a dozen tiny fake steps, and the brute force's 8 once
@pytest.mark.parametrize("answer, divides", [(5, None), (2, None), (4, 8)])
def test_largest_micro_batch_is_the_largest_that_fits(
    answer: int, divides: int | None, batch_peaks: dict[int, int]
) -> None:
    """The search against brute force: the GPU is sized between the answer's peak and the next
    candidate's (with `divides`, only its divisors are candidates)."""
    peaks = batch_peaks
    assert all(peaks[b] < peaks[b + 1] for b in range(1, 8))
    nxt = answer + 1 if divides is None else min(b for b in range(answer + 1, 9) if divides % b == 0)
    gpu = GPU("test", (peaks[answer] + peaks[nxt]) / 2 / GIB / 0.9, 1e15, 1e15, 1e15)
    setup = Setup(cfg(), OPTIM, 1)
    best = largest_micro_batch(setup, gpu, None, 0.1, divides=divides)
    assert best is not None and best.setup.micro_batch == answer
    too_small = GPU("tiny", peaks[1] / GIB / 2, 1e15, 1e15, 1e15)
    assert largest_micro_batch(setup, too_small, None, 0.1) is None


@pytest.mark.parametrize("power", [0.5, 1.6])  # the linear guess from 1 and 2 under- / overshoots
def test_micro_batch_search_on_a_curved_memory_landscape(monkeypatch, power: float) -> None:
    """The search logic alone, on a hand-made peak(b) = 1 GiB + b^power GiB: galloping up when the
    guess is low, bisecting when it is high, each answer against the closed form."""
    import gptlab.planning.plan as planning

    calls: list[int] = []

    def fake_plan(setup: Setup, gpu: GPU, mfu, headroom) -> object:
        calls.append(setup.micro_batch)
        peak = int(GIB * (1 + setup.micro_batch**power))
        memory = dataclasses.make_dataclass("M", ["peak"])(peak)
        plan_type = dataclasses.make_dataclass("P", ["setup", "memory", "fits"])
        return plan_type(setup, memory, peak <= planning.usable_bytes(gpu, headroom))

    monkeypatch.setattr(planning, "plan", fake_plan)
    for room_gib in (3.5, 40.0, 200.0):
        room = planning.usable_bytes(GPU("test", room_gib / 0.9, 1, 1, 1), 0.1)
        answer = max(b for b in range(1, planning.MAX_MICRO_BATCH) if int(GIB * (1 + b**power)) <= room)
        calls.clear()
        gpu = GPU("test", room_gib / 0.9, 1e15, 1e15, 1e15)
        best = planning.largest_micro_batch(Setup(cfg(), OPTIM, 1), gpu, None, 0.1)
        assert best.setup.micro_batch == answer, (power, room_gib)
        assert len(set(calls)) <= 3 * math.log2(answer + 2) + 4  # gallop + bisect, not a walk
    flat = GPU("flat", 1e9, 1e15, 1e15, 1e15)  # everything fits: the search stops at its ceiling
    best = planning.largest_micro_batch(Setup(cfg(), OPTIM, 1), flat, None, 0.1)
    assert best.setup.micro_batch == planning.MAX_MICRO_BATCH
