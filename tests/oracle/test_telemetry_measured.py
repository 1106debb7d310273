"""Telemetry against the tensors themselves: grad norms before and after the clip, update ratios,
parameter norms and activation RMS, measured here from the actual .grad / weights / stream.

The real path trains: `gptlab.training.app.train` on a config composed as train.py composes it (its
own callbacks, LayerTelemetry among them, its own Trainer), with one test-only `Probe` appended after
them. The probe shares nothing with telemetry: per-parameter `torch.linalg.vector_norm` in float64,
groups named from the parameter names here.

- pre-clip: `on_before_optimizer_step` (Lightning calls it after backward and AMP unscale, before
  `configure_gradient_clipping`).
- post-clip: a step POST-hook on the torch optimizer reads the .grad the update has just used
  (Lightning zeroes gradients only inside the next step's closure). A step PRE-hook would not do:
  Lightning passes the whole forward/backward/clip as the closure of `optimizer.step`, so a pre-hook
  runs before this step's backward and sees the previous step's gradients.
- update ratio ||W_after − W_before|| / ||W_after|| per block, from snapshots taken around the step.
- act_rms: the RMS of the embedding output and of each block's output, from a forward of the step's
  first micro-batch done here (dropout 0, weights not yet updated).

The DDP case (2 CPU processes over gloo, spawned by the test) puts LayerTelemetry and the
probe on a plain Lightning Trainer: every rank's .grad is the all-reduced replica, so the norms logged
must equal one rank's local norms (not √2 times them: the replica factor).
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import lightning as L
import pytest
import torch

from tests.training import rel_harness
from tests.waiting import join

REPO = Path(__file__).resolve().parents[2]
REL = 1e-5


# ---- the probe: what the tensors say --------------------------------------------------------------
def groups_of(name: str, tied: bool) -> list[str]:
    """docs/architecture.md's telemetry groups, spelled out here from the parameter name."""
    if name.startswith(("tok_emb.", "pos_emb.")):
        return ["embed"]
    if name.startswith("final_norm."):
        return ["final_norm"]
    if name.startswith("lm_head."):
        return [] if tied else ["head"]
    _, i, sub = name.split(".")[:3]
    block = f"block_{int(i):02d}"
    return [block, f"{block}/{'attn' if sub.startswith('attn') else 'ffn'}"]


def group_norms(tensors: dict[str, torch.Tensor], tied: bool) -> dict[str, float]:
    sq: dict[str, float] = {}
    for name, t in tensors.items():
        v = float(torch.linalg.vector_norm(t.double())) ** 2
        for g in ["total", *groups_of(name, tied)]:
            sq[g] = sq.get(g, 0.0) + v
    return {g: math.sqrt(v) for g, v in sq.items()}


def world_mean(x: float) -> float:
    """Mean over DDP ranks (the probe's own all-reduce); x itself in one process."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return x
    t = torch.tensor([x], dtype=torch.float64)
    dist.all_reduce(t)
    return float(t) / dist.get_world_size()


class Probe(L.Callback):
    """One record per optimizer step: pre/post-clip grad norms, update ratios, norms, act RMS."""

    def __init__(self) -> None:
        self.steps: list[dict[str, Any]] = []
        self._rec: dict[str, Any] = {}
        self._batch: torch.Tensor | None = None
        self._hook = None

    def _named(self, pl_module: Any) -> dict[str, torch.nn.Parameter]:
        return dict(pl_module.model.named_parameters())  # a tied matrix once, as tok_emb.weight

    def on_train_start(self, trainer: L.Trainer, pl_module: Any) -> None:
        (opt,) = trainer.optimizers  # the torch AdamW itself, not Lightning's wrapper
        self._hook = opt.register_step_post_hook(self._after_update)

    def on_train_end(self, trainer: L.Trainer, pl_module: Any) -> None:
        if self._hook is not None:
            self._hook.remove()

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: Any, batch: Any, batch_idx: int) -> None:
        if batch_idx % trainer.accumulate_grad_batches == 0:
            self._batch = batch
            self._rec = {"step": trainer.global_step}

    @torch.no_grad()
    def on_before_backward(self, trainer: L.Trainer, pl_module: Any, loss: torch.Tensor) -> None:
        if self._batch is None:
            return
        model, idx = pl_module.model, self._batch[:, :-1]
        x = model.tok_emb(idx)
        if model.pos_emb is not None:
            x = x + model.pos_emb(torch.arange(idx.shape[1]))
        rope = (model.rope_cos, model.rope_sin) if model.pos_emb is None else None
        acts = {"embed": world_mean(float(x.double().pow(2).mean()))}
        for i, block in enumerate(model.blocks):
            x = block(x, rope)
            acts[f"block_{i:02d}"] = world_mean(float(x.double().pow(2).mean()))
        self._rec["act_rms"] = {k: math.sqrt(v) for k, v in acts.items()}
        self._batch = None

    def on_before_optimizer_step(self, trainer: L.Trainer, pl_module: Any, optimizer: Any) -> None:
        named = self._named(pl_module)
        tied = pl_module.model.cfg.tie_embeddings
        grads = {n: p.grad for n, p in named.items() if p.grad is not None}
        assert len(grads) == len(named)
        self._rec["pre"] = group_norms(grads, tied)
        self._rec["before"] = {n: p.detach().clone() for n, p in named.items()}

    def _after_update(self, optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        grads = [p.grad for g in optimizer.param_groups for p in g["params"] if p.grad is not None]
        total = sum(float(torch.linalg.vector_norm(g.double())) ** 2 for g in grads)
        self._rec["post"] = math.sqrt(total)

    def on_train_batch_end(
        self, trainer: L.Trainer, pl_module: Any, outputs: Any, batch: Any, i: int
    ) -> None:
        if "before" not in self._rec or "post" not in self._rec:
            return  # not the last micro-batch of a step
        named = self._named(pl_module)
        tied = pl_module.model.cfg.tie_embeddings
        before = self._rec.pop("before")
        after = {n: p.detach().double() for n, p in named.items()}
        delta = group_norms({n: after[n] - before[n].double() for n in named}, tied)
        param = group_norms(after, tied)
        blocks = [g for g in param if g.startswith("block_") and "/" not in g]
        self._rec["update_ratio"] = {b: delta[b] / param[b] for b in blocks}
        self._rec["param"] = {g: v for g, v in param.items() if "/" not in g}
        self.steps.append(self._rec)
        self._rec = {}


def telemetry_of(trainer_callbacks: list[L.Callback]) -> Any:
    from gptlab.training.callbacks.telemetry import LayerTelemetry

    (t,) = [c for c in trainer_callbacks if isinstance(c, LayerTelemetry)]
    return t


# ---- the comparisons ------------------------------------------------------------------------------
def check_against_probe(history: list[tuple[int, dict[str, float]]], probe: Probe, clip: float) -> None:
    """Every logged value against the probe's measurement of the same step."""
    assert len(history) == len(probe.steps) >= 3
    for (step, m), rec in zip(history, probe.steps, strict=True):
        assert step == rec["step"]
        pre = rec["pre"]
        logged = {k.split("/", 1)[1]: v for k, v in m.items() if k.startswith("grad_norm/")}
        logged.pop("clip_coef", None)
        assert set(logged) == set(pre), (sorted(logged), sorted(pre))
        for g, v in pre.items():  # pre-clip, group by group
            assert logged[g] == pytest.approx(v, rel=REL), (step, g, logged[g], v)
        for g, v in rec["param"].items():
            assert m[f"param_norm/{g}"] == pytest.approx(v, rel=REL), (step, g)
        for b, v in rec["update_ratio"].items():
            assert m[f"update_ratio/{b}"] == pytest.approx(v, rel=REL), (step, b)
        assert set(rec["update_ratio"]) == {k.split("/")[1] for k in m if k.startswith("update_ratio/")}
        for k, v in rec["act_rms"].items():
            assert m[f"act_rms/{k}"] == pytest.approx(v, rel=REL), (step, k)

        post = rec["post"]
        if clip > 0:
            if pre["total"] > clip:  # clipping binds: the update used a gradient of norm <= c
                assert post <= clip * (1 + 1e-6), (step, pre["total"], post, clip)
            else:
                assert post == pytest.approx(pre["total"], rel=1e-6), (step, post, pre["total"])
            # the logged factor is the one applied to the gradients
            assert m["grad_norm/clip_coef"] == pytest.approx(post / pre["total"], rel=REL), (
                step,
                m["grad_norm/clip_coef"],
                post / pre["total"],
            )
        else:  # clipping off: the update used the gradient as backward left it
            assert post == pytest.approx(pre["total"], rel=1e-6), (step, post, pre["total"])
            assert "grad_norm/clip_coef" not in m


# ---- single process: the app's own path ---------------------------------------------------------
TINY = [  # the reliability harness's tiny run, a few steps, an LR that moves the weights visibly
    *rel_harness.TINY,
    "trainer.max_steps=4",
    "trainer.val_check_interval=1000",
    "optim.lr=1e-2",
    "optim.warmup_steps=2",
]


def train_here(run_dir: Path, cache: Path, monkeypatch: pytest.MonkeyPatch, *overrides: str):
    """app.train in this process on the composed config, with the probe after the app's callbacks."""
    import gptlab.training.app as app
    from gptlab.compose import compose_raw

    raw, _ = compose_raw([*TINY, f"data.cache_dir={cache}", *overrides])
    probe = Probe()
    built: list[L.Callback] = []
    original = app.build_callbacks

    def with_probe(*a: Any, **k: Any) -> list[L.Callback]:
        built[:] = [*original(*a, **k), probe]
        return built

    monkeypatch.setattr(app, "build_callbacks", with_probe)
    app.train(app.validate(raw), raw, run_dir)
    return telemetry_of(built).history, probe


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("telemetry-cache")


@pytest.mark.parametrize(
    "clip,extra",
    [
        # c well below the gradient norm (~0.5-3 here): every step clips
        (0.02, []),
        (0.02, ["trainer.accumulate_grad_batches=2", "model.tie_embeddings=false"]),
        (0.0, ["model.norm_placement=post", "model.pos_emb=learned"]),  # clipping off
        (1e3, []),  # on but never binding: factor 1, gradient untouched
    ],
    ids=["clip-binds", "clip-binds-accum2-untied", "clip-off-post-learned", "clip-loose"],
)
def test_telemetry_equals_measured_tensors(tmp_path, cache, monkeypatch, clip, extra) -> None:
    history, probe = train_here(tmp_path / "run", cache, monkeypatch, f"optim.grad_clip={clip}", *extra)
    if clip == 0.02:
        totals = [r["pre"]["total"] for r in probe.steps]
        assert all(t > 5 * clip for t in totals), totals
    check_against_probe(history, probe, clip)


# ---- two DDP processes ------------------------------------------------------------------------------
DDP_STEPS, DDP_CLIP = 3, 0.02


def ddp_fit(rank: int, out: Path, port: int) -> None:
    """Rank `rank` of a 2-process CPU DDP fit over gloo, in a process spawned by the test (not forked:
    a fork of a process whose OpenMP pool is running can deadlock in the child); each rank writes what
    telemetry logged and the probe saw."""
    import os

    os.environ.update(
        MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE="2", NODE_RANK="0", LOCAL_RANK=str(rank)
    )
    torch.set_num_threads(1)
    from torch.utils.data import DataLoader

    from gptlab.config import OptimConfig
    from gptlab.model import GPTConfig
    from gptlab.training.callbacks.telemetry import LayerTelemetry
    from gptlab.training.module import GPTLightningModule

    L.seed_everything(0, verbose=False)
    cfg = GPTConfig(vocab_size=64, block_size=16, n_layer=2, n_head=2, n_embd=32)
    optim = OptimConfig(lr=1e-2, warmup_steps=1, grad_clip=DDP_CLIP)
    module = GPTLightningModule(model=dataclasses.asdict(cfg), optim=dataclasses.asdict(optim))
    data = torch.randint(0, 64, (DDP_STEPS * 8, 17), generator=torch.Generator().manual_seed(0))

    class Dump(L.Callback):
        def on_train_end(self, trainer: L.Trainer, pl_module: Any) -> None:
            steps = [{k: v for k, v in r.items() if k != "before"} for r in probe.steps]
            result = {
                "history": telemetry.history,
                "probe": steps,
                "attention": attention.steps,  # this rank's batch only
                "world": trainer.world_size,
            }
            (out / f"rank{trainer.global_rank}.json").write_text(json.dumps(result))

    from tests.training.callbacks.test_attention_oracle import Reference

    telemetry, probe, attention = LayerTelemetry(every=1, figures=False), Probe(), Reference()
    trainer = L.Trainer(
        accelerator="cpu",
        devices=2,
        strategy="ddp",
        max_steps=DDP_STEPS,
        log_every_n_steps=1,
        logger=False,
        callbacks=[telemetry, probe, attention, Dump()],
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        limit_val_batches=0,
        num_sanity_val_steps=0,
        default_root_dir=str(out),
    )
    trainer.fit(module, train_dataloaders=DataLoader(list(data), batch_size=4))


@pytest.mark.slow
@pytest.mark.multiproc
def test_ddp_telemetry_counts_replicas_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    import torch.multiprocessing as mp

    for key in ("LOCAL_RANK", "RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "NODE_RANK"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # inherited by the spawned ranks
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    ctx = mp.start_processes(ddp_fit, args=(tmp_path, port), nprocs=2, join=False, start_method="spawn")
    join(ctx, "the 2-process DDP fit")
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert all(r["world"] == 2 for r in ranks)
    # DDP: both ranks hold the same all-reduced gradient, so one rank's local measure is the global one
    for a, b in zip(ranks[0]["probe"], ranks[1]["probe"], strict=True):
        assert a["pre"]["total"] == pytest.approx(b["pre"]["total"], rel=1e-6)
    probe = Probe()
    probe.steps = ranks[0]["probe"]
    check_against_probe([(s, m) for s, m in ranks[0]["history"]], probe, DDP_CLIP)
    # forward-side signals over the global batch, from each rank's own plain-torch numbers: a max
    # is the larger rank's, means (equal token counts) the average; the std from pooled moments
    for (_, m), a, b in zip(ranks[0]["history"], ranks[0]["attention"], ranks[1]["attention"], strict=True):
        for key in a:
            if key.endswith("max") or "_max/" in key:
                want = max(a[key], b[key])
            elif key == "logits/std":
                mean = (a["logits/mean"] + b["logits/mean"]) / 2
                second = (a[key] ** 2 + a["logits/mean"] ** 2 + b[key] ** 2 + b["logits/mean"] ** 2) / 2
                want = math.sqrt(second - mean**2)
            elif key.startswith("update_rms/"):
                assert a[key] == pytest.approx(b[key], rel=1e-6)  # replicas took the same step
                want = a[key]
            else:
                want = (a[key] + b[key]) / 2
            assert m[key] == pytest.approx(want, rel=1e-4), (key, m[key], want, a[key], b[key])
