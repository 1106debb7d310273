"""Oracle: a training loop written here in plain PyTorch against the Lightning path as train.py runs it.

The reference shares nothing with src/gptlab/training: its loss, gradient accumulation, clipping
(torch.nn.utils.clip_grad_norm_ on the parameters), AdamW parameter groups and LR schedule are written
out below from their descriptions (conf/optim/adamw.yaml and OptimConfig's docstring). Only
the GPT module (its forward; tested elsewhere against written-out formulas) and the batches (the data
order is tested in tests/data) are taken from the real run: the weights right after construction
and every micro-batch the trainer was handed, captured by a test-only callback that reads them and
changes nothing.

Settings: 24 optimizer steps of 2 micro-batches (accumulate_grad_batches=2) of 4 windows, warmup 5
steps then cosine decay to min_lr > 0, weight decay 0.1, dropout 0, clipping binding. Two clip
values: 0.05 (binds on every step, by a factor ~50) and 1.5 (binds on most steps, not all). A clip
that binds on every step hides any constant factor on the gradient (clip(k·g) = clip(g)) and Adam
hides it when nothing clips, so only a clip that binds on some steps and not others sees a gradient
that is, say, twice too large (a wrong DDP/FSDP reduction): the multi-process runs use 1.5.

The per-step train/loss (metrics.csv) must equal the reference's to 1e-5 relative on every step,
and the final weights to 1e-5 relative (per tensor, in L2): any divergence fails, whatever its cause.

trainer.precision=bf16-mixed on CPU (section 4) against the same loop under torch.autocast (tight:
the same kernels) and against the fp32 loop (within bf16's rounding, derived there); FSDP2 with its
bf16 mixed-precision policy over gloo against the fp32 loop's per-group gradient norms.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import lightning as L
import pytest
import torch
import torch.nn.functional as F

from tests.distributed.helpers import read_metrics, series

REPO = Path(__file__).resolve().parents[2]

STEPS = 24
ACCUM = 2
GLOBAL_BATCH = 4
BLOCK = 64
WARMUP = 5
LR = 2e-3
MIN_LR = 2e-4
WEIGHT_DECAY = 0.1
BETAS = (0.9, 0.95)
EPS = 1e-8
CLIP_ALWAYS = 0.05  # ~50x below the gradient norm (1.2 .. 3.3 on this run): clips every step
CLIP_MOST = 1.5  # clips ~21 of the 24 steps: constant gradient factors become visible
SEED = 7
LOSS_RTOL = 1e-5
WEIGHT_RTOL = 1e-5


def _small_validation() -> list[str]:
    """A small validation (it only has to run): the schema's knob for it, whichever it has."""
    from gptlab.config import TrainerConfig
    from gptlab.data.config import DataConfig

    knobs = [
        (DataConfig, "val_windows", "data.val_windows=8"),
        (TrainerConfig, "limit_val_batches", "trainer.limit_val_batches=1"),
    ]
    return [o for cls, name, o in knobs if name in {f.name for f in fields(cls)}]


def overrides(clip: float, precision: str = "32-true") -> list[str]:
    """The Hydra overrides of the real run (everything the reference depends on is pinned here)."""
    return [
        *_small_validation(),
        "model.n_layer=2",
        "model.n_embd=64",
        "model.n_head=4",
        f"model.block_size={BLOCK}",
        "model.dropout=0.0",
        "data.max_bytes=200000",
        "data.num_proc=1",
        f"trainer.max_steps={STEPS}",
        f"trainer.accumulate_grad_batches={ACCUM}",
        f"trainer.val_check_interval={STEPS * ACCUM}",  # one validation, at the end: last.ckpt
        "trainer.log_every_n_steps=1",
        "trainer.enable_progress_bar=false",
        f"trainer.precision={precision}",
        "callbacks.telemetry.figures=false",
        "sample.max_new_tokens=0",
        "logger=csv",
        f"optim.lr={LR}",
        f"optim.min_lr={MIN_LR}",
        f"optim.warmup_steps={WARMUP}",
        "optim.schedule=cosine",
        f"optim.weight_decay={WEIGHT_DECAY}",
        f"optim.beta1={BETAS[0]}",
        f"optim.beta2={BETAS[1]}",
        f"optim.eps={EPS}",
        f"optim.grad_clip={clip}",
        f"seed={SEED}",
    ]


# --------------------------------------------------------------------------------------------------
# The reference: written from the descriptions, not from src/gptlab/training
# --------------------------------------------------------------------------------------------------


def lr_at(step: int) -> float:
    """Linear warmup to LR over WARMUP steps, then cosine from LR down to MIN_LR at STEPS."""
    if step < WARMUP:
        return LR * (step + 1) / WARMUP
    progress = (step - WARMUP) / (STEPS - WARMUP)
    floor = MIN_LR / LR
    return LR * (floor + (1.0 - floor) * 0.5 * (1.0 + math.cos(math.pi * progress)))


@dataclass
class Reference:
    losses: list[float]  # per optimizer step: the mean of its micro-batches' losses
    pre_clip: list[float]  # global gradient norm before clipping
    state: dict[str, torch.Tensor]  # weights after the last step
    groups: list[dict[str, float]] = field(default_factory=list)  # per step: grad norms by group


def reference_loop(
    model_cfg: dict[str, Any], initial: dict[str, torch.Tensor], batches, clip, bf16: bool = False
) -> Reference:
    """The loop; `bf16`: forward and loss under CPU bf16 autocast (torch.autocast, what
    trainer.precision=bf16-mixed means), weights, gradients and AdamW in fp32."""
    from gptlab.model import GPT, GPTConfig

    model = GPT(GPTConfig.from_dict(dict(model_cfg)))
    model.load_state_dict(initial)
    model.train()
    params = list(model.parameters())  # a tied embedding / head appears once
    opt = torch.optim.AdamW(
        [
            {"params": [p for p in params if p.dim() >= 2], "weight_decay": WEIGHT_DECAY},
            {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
        ],
        lr=LR,
        betas=BETAS,
        eps=EPS,
        # torch's fused kernel, which gptlab runs on CPU too: its for-loop AdamW agrees in fp32 within
        # LOSS_RTOL, but under bf16 autocast a weight's last-bit difference can flip a bf16 rounding
        # (3.7e-6 of a loss, past AUTOCAST_RTOL)
        fused=True,
    )
    assert len(batches) == STEPS * ACCUM
    losses, pre_clip, groups = [], [], []
    for step in range(STEPS):
        for group in opt.param_groups:
            group["lr"] = lr_at(step)
        opt.zero_grad(set_to_none=True)
        step_loss = 0.0
        for micro in range(ACCUM):
            w = batches[step * ACCUM + micro]
            x, y = w[:, :-1], w[:, 1:]
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                logits = model(x)
                loss = F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), y.reshape(-1))
            (loss / ACCUM).backward()
            step_loss += loss.item() / ACCUM
        groups.append(group_grad_norms(model))
        pre_clip.append(float(torch.nn.utils.clip_grad_norm_(params, clip)))
        opt.step()
        losses.append(step_loss)
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    return Reference(losses, pre_clip, state, groups)


def group_grad_norms(model: torch.nn.Module) -> dict[str, float]:
    """Pre-clip gradient norms by the groups docs/architecture.md names for grad_norm/*: embed
    (tok_emb, pos_emb), block_XX and its /attn (attn_norm, attn) and /ffn (ffn_norm, ffn) halves,
    final_norm; written here from that table, not taken from the telemetry's code."""
    sq: dict[str, float] = {}
    for name, p in model.named_parameters():
        parts = name.split(".")
        if parts[0] == "blocks":
            block = f"block_{int(parts[1]):02d}"
            keys = [block, f"{block}/{'attn' if parts[2].startswith('attn') else 'ffn'}"]
        else:
            keys = [{"tok_emb": "embed", "pos_emb": "embed", "lm_head": "head"}.get(parts[0], parts[0])]
        for key in keys:
            sq[key] = sq.get(key, 0.0) + float(p.grad.double().pow(2).sum())
    return {k: math.sqrt(v) for k, v in sq.items()}


# --------------------------------------------------------------------------------------------------
# The real path, and what the test measures on it
# --------------------------------------------------------------------------------------------------


class Capture(L.Callback):
    """Reads (never changes) what the real run does: initial weights, every micro-batch, and around
    each optimizer step the gradient norm before clipping and the one the optimizer stepped with.

    The stepped norm is taken in an optimizer step *post*-hook: with a closure (Lightning's
    automatic optimization, fp32 and bf16-mixed), `optimizer.step(closure)` runs its pre-hooks
    before the closure, i.e. before backward and clipping; AdamW does not modify `.grad`, and
    Lightning zeroes it only later, so after the step `.grad` is exactly what the update used.
    """

    def __init__(self) -> None:
        self.model_cfg: dict[str, Any] = {}
        self.initial: dict[str, torch.Tensor] = {}
        self.final: dict[str, torch.Tensor] = {}
        self.batches: list[torch.Tensor] = []
        self.pre_clip: list[float] = []
        self.stepped: list[float] = []
        self.lrs: list[list[float]] = []
        self.decay: list[list[tuple[int, float]]] = []

    def on_fit_start(self, trainer: L.Trainer, pl_module: Any) -> None:
        self.model_cfg = dict(pl_module.hparams["model"])
        self.initial = {k: v.detach().clone() for k, v in pl_module.model.state_dict().items()}

    def on_train_start(self, trainer: L.Trainer, pl_module: Any) -> None:
        (opt,) = trainer.optimizers

        def after_step(optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
            grads = [p.grad for g in optimizer.param_groups for p in g["params"] if p.grad is not None]
            self.stepped.append(float(torch.linalg.vector_norm(torch.stack([g.norm() for g in grads]))))
            self.lrs.append([g["lr"] for g in optimizer.param_groups])
            self.decay.append(
                [(p.dim(), g["weight_decay"]) for g in optimizer.param_groups for p in g["params"]]
            )

        opt.register_step_post_hook(after_step)

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: Any, batch: Any, batch_idx: int) -> None:
        self.batches.append(batch.detach().cpu().clone())

    def on_before_optimizer_step(self, trainer: L.Trainer, pl_module: Any, optimizer: Any) -> None:
        # runs before Lightning calls configure_gradient_clipping
        grads = [p.grad for p in pl_module.parameters() if p.grad is not None]
        self.pre_clip.append(float(torch.linalg.vector_norm(torch.stack([g.norm() for g in grads]))))

    def on_train_end(self, trainer: L.Trainer, pl_module: Any) -> None:
        self.final = {k: v.detach().clone() for k, v in pl_module.model.state_dict().items()}


@dataclass
class RealRun:
    run_dir: Path
    capture: Capture
    losses: dict[int, float] = field(default_factory=dict)


def train_in_process(run_dir: Path, cache: Path, clip: float, precision: str = "32-true") -> RealRun:
    """gptlab.training.app.train on the config train.py composes, with Capture after the app's
    callbacks (the trainer is build_trainer's, the callbacks build_callbacks' plus this one)."""
    import gptlab.training.app as app
    from gptlab.compose import compose_raw

    raw, _ = compose_raw(
        [
            *overrides(clip, precision),
            f"data.batch_size={GLOBAL_BATCH}",
            "trainer.accelerator=cpu",
            "trainer.devices=1",
            f"data.cache_dir={cache}",
        ]
    )
    capture = Capture()
    original = app.build_callbacks
    app.build_callbacks = lambda *a, **k: [*original(*a, **k), capture]
    try:
        app.train(app.validate(raw), raw, run_dir)
    finally:
        app.build_callbacks = original
    return RealRun(run_dir, capture, series(read_metrics(run_dir), "train/loss"))


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("oracle_loop")


@pytest.fixture(scope="module")
def runs(root: Path):
    """(clip, precision) -> RealRun, each trained once per module."""
    done: dict[tuple[float, str], RealRun] = {}

    def get(clip: float, precision: str = "32-true") -> RealRun:
        key = (clip, precision)
        if key not in done:
            done[key] = train_in_process(root / f"run_{clip}_{precision}", root / "cache", clip, precision)
        return done[key]

    return get


@pytest.fixture(scope="module")
def references(runs):
    """(clip, bf16) -> the reference loop on the fp32 run's weights and batches."""
    done: dict[tuple[float, bool], Reference] = {}

    def get(clip: float, bf16: bool = False) -> Reference:
        if (clip, bf16) not in done:
            c = runs(clip).capture
            done[clip, bf16] = reference_loop(c.model_cfg, c.initial, c.batches, clip, bf16=bf16)
        return done[clip, bf16]

    return get


def assert_losses_match(got: dict[int, float], ref: Reference, label: str) -> None:
    assert sorted(got) == list(range(STEPS)), (label, sorted(got))
    bad = [
        (s, got[s], ref.losses[s])
        for s in range(STEPS)
        if abs(got[s] - ref.losses[s]) > LOSS_RTOL * abs(ref.losses[s])
    ]
    assert not bad, f"{label}: train/loss differs from the reference at (step, got, want): {bad}"


def assert_weights_match(got: dict[str, torch.Tensor], ref: Reference, label: str) -> None:
    assert sorted(got) == sorted(ref.state), label
    worst = {
        k: float((got[k].float() - v.float()).norm() / v.float().norm().clamp_min(1e-12))
        for k, v in ref.state.items()
    }
    bad = {k: e for k, e in worst.items() if e > WEIGHT_RTOL}
    assert not bad, f"{label}: final weights differ from the reference (relative L2): {bad}"


# --------------------------------------------------------------------------------------------------
# 1. One process
# --------------------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("clip", [CLIP_ALWAYS, CLIP_MOST])
def test_settings_exercise_what_they_should(runs, references, clip: float) -> None:
    """Clipping binds (always for 0.05, on most but not all steps for 1.5), the schedule crosses
    from warmup into decay, and the run really accumulated 2 micro-batches of 4 windows per step."""
    real = runs(clip)
    ref = references(clip)
    c = real.capture
    assert len(c.batches) == STEPS * ACCUM and len(c.stepped) == STEPS == len(c.pre_clip)
    assert all(b.shape == (GLOBAL_BATCH, BLOCK + 1) for b in c.batches)
    binding = [n > clip for n in ref.pre_clip]
    if clip == CLIP_ALWAYS:
        assert all(n > 20 * clip for n in ref.pre_clip), ref.pre_clip
    else:
        assert sum(binding) >= 2 * STEPS // 3 and not all(binding), ref.pre_clip
    assert WARMUP < STEPS and lr_at(STEPS - 1) > MIN_LR > 0
    # the telemetry's logged pre-clip norm agrees with what the test measured
    logged = series(read_metrics(real.run_dir), "grad_norm/total")
    assert sorted(logged) == list(range(STEPS))
    for s in range(STEPS):
        assert logged[s] == pytest.approx(c.pre_clip[s], rel=1e-5), s


@pytest.mark.slow
@pytest.mark.parametrize("clip", [CLIP_ALWAYS, CLIP_MOST])
def test_single_process_matches_reference_loop(runs, references, clip: float) -> None:
    real, ref = runs(clip), references(clip)
    assert_losses_match(real.losses, ref, f"1 process, clip {clip}")
    assert_weights_match(real.capture.final, ref, f"1 process, clip {clip}")


@pytest.mark.slow
def test_optimizer_steps_with_the_written_schedule_and_decay_groups(runs) -> None:
    """What the optimizer held when it stepped (read in its post-hook), against the formula here."""
    c = runs(CLIP_MOST).capture
    for step, lrs in enumerate(c.lrs):
        for lr in lrs:
            assert lr == pytest.approx(lr_at(step), rel=1e-9, abs=1e-15), (step, lrs, lr_at(step))
    for dim, wd in c.decay[0]:
        assert wd == (WEIGHT_DECAY if dim >= 2 else 0.0), (dim, wd)


# --------------------------------------------------------------------------------------------------
# 3. Clipping bounds the gradient the optimizer steps with: fp32 and bf16-mixed
# --------------------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("precision", ["32-true", "bf16-mixed"])
def test_optimizer_steps_with_the_clipped_gradient(runs, precision: str) -> None:
    c = runs(CLIP_MOST, precision).capture
    assert len(c.pre_clip) == len(c.stepped) == STEPS
    clipped = 0
    for step, (pre, stepped) in enumerate(zip(c.pre_clip, c.stepped, strict=True)):
        if pre > CLIP_MOST:
            clipped += 1
            assert stepped <= CLIP_MOST * (1 + 1e-6), (precision, step, pre, stepped)
            assert stepped == pytest.approx(CLIP_MOST, rel=1e-5), (precision, step, pre, stepped)
        else:  # within the bound: untouched
            assert stepped == pytest.approx(pre, rel=1e-6), (precision, step, pre, stepped)
    assert clipped >= STEPS // 2, (precision, c.pre_clip)
    # the logged clip_coef is the factor that was applied
    coef = series(read_metrics(runs(CLIP_MOST, precision).run_dir), "grad_norm/clip_coef")
    for step, (pre, stepped) in enumerate(zip(c.pre_clip, c.stepped, strict=True)):
        assert coef[step] == pytest.approx(stepped / pre, rel=1e-5), (precision, step)


# --------------------------------------------------------------------------------------------------
# 2. Two processes over gloo: DDP and FSDP2, the same global batch, against the same reference
# --------------------------------------------------------------------------------------------------


TWO_PROCESS = {  # run name -> its overrides on top of the fp32 run's, at CLIP_MOST
    "ddp": ([], "32-true"),
    "fsdp": (["trainer=fsdp"], "32-true"),
    "fsdp_bf16": (["trainer=fsdp"], "bf16-mixed"),
}


@pytest.fixture(scope="module")
def two_process(root: Path, references) -> dict[str, Path]:
    """The 2-process runs, name -> run dir, all in one pair of spawned gloo ranks (the app as
    train.py runs it: tests/distributed/ranks.py)."""
    from tests.distributed.ranks import train_two_ranks

    references(CLIP_MOST)  # trains the 1-process run first: it fills the token cache
    two = ["trainer.accelerator=cpu", "trainer.devices=2", f"data.batch_size={GLOBAL_BATCH // 2}",
           f"data.cache_dir={root / 'cache'}"]  # fmt: skip
    jobs = [
        (root / name, [*overrides(CLIP_MOST, precision), *extra, *two])
        for name, (extra, precision) in TWO_PROCESS.items()
    ]
    train_two_ranks(jobs, "the 2-process runs")
    return {name: root / name for name in TWO_PROCESS}


def final_weights(out: Path) -> dict[str, torch.Tensor]:
    """The model weights of <run>/checkpoints/last.ckpt (a file, or FSDP2's distributed directory),
    after the last step (its global_step is checked)."""
    path = out / "checkpoints" / "last.ckpt"
    if path.is_dir():
        from torch.distributed.checkpoint.format_utils import dcp_to_torch_save

        meta = torch.load(path / "meta.pt", weights_only=True)
        dcp_to_torch_save(path, out / "last_full.pt")
        ckpt = {**meta, **torch.load(out / "last_full.pt", weights_only=True)}
    else:
        ckpt = torch.load(path, weights_only=True, map_location="cpu")
    assert ckpt["global_step"] == STEPS
    return {k.removeprefix("model."): v for k, v in ckpt["state_dict"].items()}


@pytest.mark.slow
def test_two_ranks_read_the_reference_batches(runs) -> None:
    """The reference sees the global batch: ranks 0 and 1 of a 2-process run (stream positions
    g % 2 == r, 2 windows each) together read the windows of each micro-batch of the 1-process run
    (compared by content, as multisets: the mean loss does not depend on the order in a batch)."""
    from gptlab.data.config import DataConfig
    from gptlab.data.datamodule import StreamBatchSampler, TokenDataModule

    real = runs(CLIP_MOST)
    data = DataConfig(max_bytes=200000, num_proc=1, cache_dir=str(real.run_dir.parent / "cache"))
    windows = TokenDataModule(data, BLOCK, SEED).dataset("train")
    ranks = [
        StreamBatchSampler(len(windows), GLOBAL_BATCH // 2, SEED, STEPS * ACCUM, rank=r, world_size=2)
        for r in range(2)
    ]
    seen = 0
    for i, (w0, w1) in enumerate(zip(*ranks, strict=True)):
        both = sorted(tuple(windows[k].tolist()) for k in [*w0, *w1])
        assert both == sorted(tuple(r) for r in real.capture.batches[i].tolist()), i
        seen += 1
    assert seen == STEPS * ACCUM


@pytest.mark.slow
@pytest.mark.multiproc
def test_ddp_matches_reference_loop(two_process: dict[str, Path], references) -> None:
    ref = references(CLIP_MOST)
    out = two_process["ddp"]
    assert_losses_match(series(read_metrics(out), "train/loss"), ref, "2-process DDP")
    assert_weights_match(final_weights(out), ref, "2-process DDP")


@pytest.mark.slow
@pytest.mark.multiproc
def test_fsdp_matches_reference_loop(two_process: dict[str, Path], references) -> None:
    ref = references(CLIP_MOST)
    out = two_process["fsdp"]
    assert_losses_match(series(read_metrics(out), "train/loss"), ref, "2-process FSDP2")
    assert_weights_match(final_weights(out), ref, "2-process FSDP2")


# --------------------------------------------------------------------------------------------------
# 4. bf16-mixed on CPU: autocast in one process, FSDP2's bf16 parameters over gloo
# --------------------------------------------------------------------------------------------------
# bf16 keeps 8 significant bits: each product it rounds is off by up to u = 2^-8 ≈ 3.9e-3 of itself.
# A step's loss is the mean of 2 x 4 x 64 = 512 token losses whose rounding errors have no common
# sign, so it moves by about u/sqrt(512) ≈ 1.7e-4 of itself; measured: at most 1.3e-4 over the 24
# steps (step 13), the final weights 5e-3 apart (relative L2). A group's gradient norm at step 0
# (same weights, same batch) carries the backward's rounding alone, ~u/4 measured (8.7e-4 at most
# with autocast, 7.7e-4 with FSDP2's bf16 parameters). Later steps add the weights' drift: the runs
# no longer hold the same weights (9e-3 at most by step 23 with autocast; 4e-2 with bf16 parameters,
# which round every forward's weights, the embeddings and the residual stream too). The tolerances
# leave 2-4x room over those (the later steps' bound only catches a wrong gradient scale, such as a
# factor 2 from a reduction) and are still far inside what a wrong step does (a sign-flipped or
# unscaled gradient moves the loss by whole percents within a few steps). Skipped autocast would be
# fp32 exactly, which these tolerances cannot tell apart: the tight match with the autocast loop can.
BF16_U = 2.0**-8
BF16_LOSS_RTOL = BF16_U / 8  # 4.9e-4
BF16_GRAD_RTOL_STEP0 = BF16_U / 2  # 2.0e-3
BF16_GRAD_RTOL = 16 * BF16_U  # 6.3e-2
AUTOCAST_RTOL = 1e-6  # Lightning's CPU autocast is torch.autocast: the same kernels (6e-8 measured)


@pytest.mark.slow
def test_bf16_mixed_is_cpu_autocast_and_tracks_fp32(runs, references) -> None:
    real = runs(CLIP_MOST, "bf16-mixed")
    same = zip(real.capture.batches, runs(CLIP_MOST).capture.batches, strict=True)
    assert all(torch.equal(a, b) for a, b in same)  # the fp32 run's batches, which the loops read
    autocast, fp32 = references(CLIP_MOST, bf16=True), references(CLIP_MOST)
    assert sorted(real.losses) == list(range(STEPS))
    for s in range(STEPS):
        got = real.losses[s]
        assert got == pytest.approx(autocast.losses[s], rel=AUTOCAST_RTOL), ("autocast", s)
        assert got == pytest.approx(fp32.losses[s], rel=BF16_LOSS_RTOL), ("fp32", s)
    # bf16 really ran: the autocast loop is not the fp32 loop (fp32 runs agree to LOSS_RTOL)
    assert max(abs(a - b) / b for a, b in zip(autocast.losses, fp32.losses, strict=True)) > LOSS_RTOL
    assert_weights_match(real.capture.final, autocast, "bf16-mixed against the autocast loop")


def assert_group_norms_track(run_dir: Path, ref: Reference, label: str) -> dict[str, float]:
    """Every grad_norm/<group> the reference has, on every step, within the bf16 tolerances;
    returns the step-0 relative differences."""
    metrics = read_metrics(run_dir)
    step0 = {}
    for group in ref.groups[0]:
        got = series(metrics, f"grad_norm/{group}")
        assert sorted(got) == list(range(STEPS)), (label, group)
        for s in range(STEPS):
            want = ref.groups[s][group]
            tol = BF16_GRAD_RTOL_STEP0 if s == 0 else BF16_GRAD_RTOL
            assert got[s] == pytest.approx(want, rel=tol), (label, group, s, got[s] / want - 1)
        step0[group] = abs(got[0] / ref.groups[0][group] - 1)
    return step0


@pytest.mark.slow
@pytest.mark.multiproc
def test_fsdp_bf16_policy_grad_norms_track_fp32(two_process: dict[str, Path], runs, references) -> None:
    """FSDP2 over gloo with trainer.precision=bf16-mixed: bf16 parameters all-gathered, fp32
    reduce-scatter (strategies.mixed_precision_policy). Its per-group gradient norms track the fp32
    loop's (the loss too, at 4x the one-process bound: 7.5e-4 measured).

    And the policy is on: under autocast alone the final norm runs in fp32 (autocast leaves norms
    alone), so FSDP2 without the policy gives the one-process bf16-mixed run's grad_norm/final_norm
    at step 0 to 4e-8 (measured, trainer.fsdp.mixed_precision=false), while bf16 gains move it by
    1.7e-4. The other groups do not separate so cleanly: their bf16 weight gradients round per
    micro-batch, and 2 windows per rank round differently from 4 (up to 1.1e-4 without the policy)."""
    fp32 = references(CLIP_MOST)
    out = two_process["fsdp_bf16"]
    assert_group_norms_track(out, fp32, "2-process FSDP2, bf16 policy")
    loss = series(read_metrics(out), "train/loss")
    for s in range(STEPS):
        assert loss[s] == pytest.approx(fp32.losses[s], rel=4 * BF16_LOSS_RTOL), s
    autocast_only = series(read_metrics(runs(CLIP_MOST, "bf16-mixed").run_dir), "grad_norm/final_norm")
    policy = series(read_metrics(out), "grad_norm/final_norm")
    assert abs(policy[0] / autocast_only[0] - 1) > 1e-5, (policy[0], autocast_only[0])
