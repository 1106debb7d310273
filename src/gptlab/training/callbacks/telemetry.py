"""Layer-wise telemetry on log steps: gradients, weights and updates, the residual stream, attention
logits and entropy, and the output logits; nothing runs, and nothing syncs, on the other steps.

Optimizer side (after the step): per-group gradient norms (pre-clip, after AMP unscale) come from the
non-finite guard, which norms every parameter's gradient each step anyway (callbacks/nonfinite.py);
parameter and update norms from one fused `_foreach_norm` each; per-group sums of squares via one
small matrix product. `update_ratio/block_XX` = ‖ΔW‖/‖W‖ of the step actually taken (after clipping)
= update RMS / weight RMS; `update_rms/block_XX` = ‖ΔW‖/√n.

Forward side (the log step's first micro-batch): `GPT.tap`, called in the model's eager block loop,
reads the stream between blocks. It is set for that forward only and runs outside the compiled
blocks, so `compile=true` never traces it (a hook on a compiled block is traced, and a new one each
log step recompiled it). It takes act_rms, and the q and k each attention has just given SDPA
(`keep_qk`: a flag on the module, so a compiled block has exactly one more graph, built on the first
log step): from them the pre-softmax logits q·k/√d_h, their max over every causal pair and the mean
entropy of each query's attention distribution. SDPA's kernel is the same on every step. The module
leaves the output logits' moments (`logits/*`) for the same micro-batch.

Under model/ffn=moe each MoE layer's routing over the step's micro-batches (loads, router entropy,
aux and z losses, dead experts, dropped assignments, the bias's range) is logged as `moe/block_XX/*`,
its sums in the same SUM all-reduce (moe_telemetry.py).

Under model.norm=dyt each DyT site's α (one learned scalar) is logged after the step as
`dyt_alpha/block_XX/<site>` and `dyt_alpha/final_norm`, packed into the same SUM all-reduce.

Reductions (one SUM and one MAX all-reduce, one host read) and the keys' names are
telemetry_metrics.py's, the attention statistics attention_stats.py's; this module holds the hooks:
when each side runs, and what it hands over.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any

import lightning as L
import torch

from gptlab.training.callbacks import moe_telemetry
from gptlab.training.callbacks.attention_stats import attention_stats
from gptlab.training.callbacks.groups import local
from gptlab.training.callbacks.telemetry_metrics import GroupIndex, reduce_metrics

log = logging.getLogger(__name__)
# the logged key families: one wandb section each, every one plotted against the optimizer step
PREFIXES = (
    "grad_norm",
    "param_norm",
    "update_ratio",
    "update_rms",
    "act_rms",
    "attn_logit_max",
    "attn_entropy",
    "attn_sink",
    "attn_gate",
    "logits",
    "dyt_alpha",
    "moe",
    "telemetry",
)


class LayerTelemetry(L.Callback):
    """grad_norm/*, param_norm/*, update_ratio/*, update_rms/*, act_rms/*, attn_logit_max/*,
    attn_entropy/*, logits/* every `every` optimizer steps (and on steps `force` names)."""

    def __init__(
        self,
        every: int,
        act_rms: bool = True,
        figures: bool = True,
        run_dir: str | Path | None = None,
        attention: bool = True,
        figures_every: int = 50,
        attention_every: int = 1,
    ) -> None:
        self.every = max(1, every)
        self.act_rms = act_rms
        self.attention = attention
        # the attention family costs an unfused attention pass (its T×T scores): taken on every
        # `attention_every`-th log step (the first one included) and on every forced step
        self.attention_every = max(1, attention_every)
        # attention_stats' chunks of sequences per layer: None (all) in a run; the planner's fake
        # step sets 2, which reach the same memory peak as all (attention_stats' docstring)
        self.stat_chunks: int | None = None
        self.figures = figures
        self.figures_every = max(1, figures_every)  # in log steps
        self.run_dir = Path(run_dir) if run_dir else None
        self.history: list[tuple[int, dict[str, float]]] = []
        self.max_grad_norm: float | None = None
        self.last_nonfinite_groups: list[str] = []
        self.forced: set[int] = set()  # optimizer-step indices to log whatever the cadence
        self._ready = False
        self._fwd: dict[str, torch.Tensor] = {}  # forward-side sums of the log step
        self._grad_sq: torch.Tensor | None = None
        self._before: list[torch.Tensor] | None = None
        self._pending = False
        self._routing: moe_telemetry.MoEPack | None = None

    # ---- set-up: which parameter goes to which group ------------------------------------------
    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        self._ready = False
        if trainer.global_rank == 0:
            self._define_wandb_metrics(trainer)

    @staticmethod
    def _define_wandb_metrics(trainer: L.Trainer) -> None:
        """Each key family plotted against the optimizer step (Lightning logs it as
        trainer/global_step); wandb groups panels by the prefix before the first '/'."""
        for logger in trainer.loggers:
            if type(logger).__name__ != "WandbLogger":
                continue
            define = getattr(logger.experiment, "define_metric", None)
            if define is None:
                continue
            define("trainer/global_step")
            for prefix in PREFIXES:
                define(f"{prefix}/*", step_metric="trainer/global_step")

    def _build_index(self, pl_module: L.LightningModule) -> None:
        self.index = GroupIndex.of(pl_module.model, pl_module.device)
        self._guard_cols: tuple[list[str], torch.Tensor] | None = None
        self._ready = True

    @property
    def blocks(self) -> list[str]:
        """The block_XX groups in depth order (the figures and the spike records read them)."""
        return self.index.blocks

    def force(self, step: int) -> None:
        """Log optimizer step `step` (0-based, as logged) whatever the cadence: the spike callback."""
        self.forced.add(step)

    def _is_log_step(self, trainer: L.Trainer) -> bool:
        # global_step counts finished optimizer steps; this matches Lightning's own log cadence
        step = trainer.global_step
        return (step + 1) % self.every == 0 or step in self.forced

    # ---- forward side: the tap lives only during the forward of a log step ---------------------
    def on_train_batch_start(self, trainer: L.Trainer, pl_module: Any, batch: Any, batch_idx: int) -> None:
        if not self._ready:
            self._build_index(pl_module)
        if not self._is_log_step(trainer) or batch_idx % trainer.accumulate_grad_batches != 0:
            return  # the first micro-batch of the step stands for the step
        due = trainer.global_step in self.forced or len(self.history) % self.attention_every == 0
        self.arm(pl_module, attention=self.attention and due)

    def arm(self, pl_module: Any, attention: bool | None = None) -> None:
        """Collect the forward-side statistics of the next forward of `pl_module` (the attention
        family too unless `attention` is False; by default as configured)."""
        attention = self.attention if attention is None else attention
        self._fwd = {}
        self._model = pl_module.model
        if self.act_rms or attention:
            pl_module.model.tap = self.on_stream  # read from the instance: a timer may wrap it
        for block in pl_module.model.blocks:
            block.attn.keep_qk = attention
        pl_module.want_logit_stats = True

    def disarm(self, pl_module: Any) -> None:
        pl_module.model.tap = None
        for block in pl_module.model.blocks:
            block.attn.keep_qk, block.attn.kept_qk, block.attn.kept_gate = False, None, None
            block.attn.kept_mask = None
        pl_module.want_logit_stats = False
        stats = getattr(pl_module, "logit_stats", None)
        if stats is not None:
            self._fwd["logits"] = stats
            pl_module.logit_stats = None

    @torch.no_grad()
    def on_stream(self, i: int, x: torch.Tensor, rope: Any) -> None:
        """GPT.tap on a log step: the stream x before block i (i = n_layer: after the last), when
        block i-1's attention has just left its q and k. Named like a hook so that scripts/bench.py's
        hook clock, which times every on_* method, counts it."""
        if self.act_rms:
            self._fwd[f"act/{i}"] = x.detach().float().pow(2).mean()
        if i == 0:
            return
        attn = self._model.blocks[i - 1].attn
        if attn.kept_qk is None:
            return
        (q, k), mask = attn.kept_qk, attn.kept_mask
        attn.kept_qk = attn.kept_mask = None
        chunks = self.stat_chunks
        top, ent, rows, sink, sink_rows = attention_stats(q, k, attn.scale, attn.softcap, mask, chunks)
        counts = ent.new_tensor([float(rows), float(sink_rows)])
        self._fwd[f"attn/{i - 1}"] = torch.cat([torch.stack([top.double(), ent, sink]), counts])
        if attn.kept_gate is not None:  # model.attn_gate: Σ gate and its count (a token-weighted mean)
            gate, attn.kept_gate = attn.kept_gate, None
            self._fwd[f"gate/{i - 1}"] = torch.stack(
                [gate.sum(dtype=torch.float64), ent.new_tensor(gate.numel())]
            )

    def on_before_backward(self, trainer: L.Trainer, pl_module: Any, loss: torch.Tensor) -> None:
        if pl_module.want_logit_stats:
            self.disarm(pl_module)

    # ---- optimizer side: pre-clip gradients, then the update taken ------------------------------
    def on_before_optimizer_step(self, trainer: L.Trainer, pl_module: Any, optimizer: Any) -> None:
        if not self._is_log_step(trainer):
            return
        if getattr(trainer.precision_plugin, "scaler", None) is not None:  # fp16: no guard runs
            grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in self.index.params]
            self._grad_sq = self.index.group_sq(grads)
        self._before = self.weights_before()
        # the step's routing, before the bias update (an optimizer post-hook) consumes the loads
        self._routing = moe_telemetry.snapshot(pl_module.model)
        self._pending = True

    def weights_before(self) -> list[torch.Tensor]:
        """A copy of every block parameter (this rank's shard) before the update, the only ones whose
        update is logged (`GroupIndex.updated`): alive through the optimizer's step of a log step,
        an extra the planner counts (planning.step)."""
        return [local(self.index.params[j]).detach().clone() for j in self.index.updated]

    def update_sq(self, before: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """(per-group Σ W², per-group Σ ΔW² of the block parameters) after the update; `before`
        becomes -ΔW, in place (no second copy of the weights)."""
        with torch.no_grad():
            now = [local(p).detach() for p in self.index.params]
            param_sq = self.index.group_sq(now)
            torch._foreach_sub_(before, [now[j] for j in self.index.updated])
            return param_sq, self.index.group_sq(before, self.index.updated)

    def _guard_grad_sq(self, pl_module: Any, step: int) -> torch.Tensor | None:
        """Per-group squared gradient norms from the guard's per-parameter norms of `step`."""
        guard = getattr(pl_module, "nonfinite", None)
        if guard is None or guard.per_param is None or guard.per_param_step != step:
            return None
        if self._guard_cols is None or self._guard_cols[0] != guard.names:
            where = {n: j for j, n in enumerate(guard.names)}
            cols = torch.tensor([where.get(n, -1) for n in self.index.names], device=guard.per_param.device)
            self._guard_cols = (list(guard.names), cols)
        cols = self._guard_cols[1]
        norms = torch.cat([guard.per_param, guard.per_param.new_zeros(1)])  # -1: no gradient, 0
        return self.index.member @ norms[cols].pow(2).to(self.index.member.device)

    def on_train_batch_end(
        self, trainer: L.Trainer, pl_module: Any, outputs: Any, batch: Any, i: int
    ) -> None:
        if not self._pending or self._before is None:
            return
        step = trainer.global_step - 1  # the index of the step just taken, as Lightning logs it
        grad_sq = self._grad_sq if self._grad_sq is not None else self._guard_grad_sq(pl_module, step)
        if grad_sq is None:  # no guard norms (a custom module): norm the gradients here
            grad_sq = self.index.group_sq(
                [p.grad if p.grad is not None else torch.zeros_like(p) for p in self.index.params]
            )
        param_sq, delta_sq = self.update_sq(self._before)
        coef = getattr(pl_module, "clip_coef", None)  # the factor clipping applied (same on every rank)
        metrics = reduce_metrics(
            self.index, self._fwd, grad_sq, param_sq, delta_sq, trainer.world_size, coef, self._routing
        )
        self._routing = None
        self._note_grad_norms(metrics)
        self._grad_sq, self._before, self._pending = None, None, False
        self._fwd = {}
        self.forced.discard(step)
        self.history.append((step, metrics))
        if trainer.global_rank == 0:
            for logger in trainer.loggers:
                logger.log_metrics(metrics, step=step)
            if self.figures and self.run_dir and len(self.history) % self.figures_every == 0:
                self.draw(trainer)

    def _note_grad_norms(self, metrics: dict[str, float]) -> None:
        """The groups whose gradient norm is not finite (the non-finite guard's report), and the
        largest total norm so far (metrics.json's max_grad_norm)."""
        self.last_nonfinite_groups = [
            g for g in self.index.groups if not math.isfinite(metrics[f"grad_norm/{g}"])
        ]
        total = metrics["grad_norm/total"]
        if total == total:
            self.max_grad_norm = max(self.max_grad_norm or 0.0, total)

    # ---- pictures: during the run (every `figures_every` log steps) and at the end ---------------
    def matrix(self, prefix: str) -> tuple[list[list[float]], list[int]]:
        """(block × log step values of `prefix`/block_XX, the steps)."""
        steps = [s for s, m in self.history if f"{prefix}/{self.blocks[0]}" in m]
        rows = [[m[f"{prefix}/{b}"] for _, m in self.history if f"{prefix}/{b}" in m] for b in self.blocks]
        return rows, steps

    def draw(self, trainer: L.Trainer) -> None:
        """Grad-norm and attention-logit heat maps and the grad-norm depth profile: PNGs in
        <run>/figures (overwritten) and, under wandb, logged again so a running job shows them."""
        if not (self.history and self.run_dir):
            return
        from gptlab.figures import depth_profile, grad_heatmap

        out = self.run_dir / "figures"
        out.mkdir(parents=True, exist_ok=True)
        images: dict[str, Path] = {}
        grad, steps = self.matrix("grad_norm")
        if steps:
            images["grad_norm_heatmap"] = grad_heatmap(grad, steps, out / "grad_norm_heatmap.png")
            images["grad_norm_depth_profile"] = depth_profile(
                grad, steps, out / "grad_norm_depth_profile.png"
            )
        logit, steps = self.matrix("attn_logit_max")
        if steps:
            images["attn_logit_max_heatmap"] = grad_heatmap(
                logit,
                steps,
                out / "attn_logit_max_heatmap.png",
                title="max attention logit q·k/√d_h",
                label="max logit",
            )
        step = self.history[-1][0]
        for logger in trainer.loggers:
            if type(logger).__name__ == "WandbLogger":
                for key, path in images.items():
                    logger.log_image(key=f"telemetry/{key}", images=[str(path)], step=step)

    def on_fit_end(self, trainer: L.Trainer, pl_module: Any) -> None:
        if self.figures and self.history and self.run_dir and trainer.global_rank == 0:
            self.draw(trainer)
