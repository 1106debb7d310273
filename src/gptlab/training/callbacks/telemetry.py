"""Layer-wise telemetry: per-group gradient, parameter and update norms, residual-stream RMS.

On a log step only: one fused `_foreach_norm` over the local gradients (pre-clip, after AMP unscale),
per-group sums of squares via one small matrix product, and one all-reduce of everything packed in a
single vector. Under FSDP2 the local gradients are shards (sum their squares across ranks); under DDP
they are replicas (count them once). Activation statistics are means over each rank's micro-batch,
averaged across ranks. Nothing runs, and nothing syncs, on the other steps.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

import lightning as L
import torch
import torch.distributed as dist
from torch import nn

log = logging.getLogger(__name__)
_BLOCK = re.compile(r"^blocks\.(\d+)\.(attn|attn_norm|attn_out_norm|ffn|ffn_norm|ffn_out_norm)\.")


def group_names(param_name: str) -> list[str]:
    """The telemetry groups a parameter belongs to, named as in DESIGN.md."""
    if param_name.startswith(("tok_emb.", "pos_emb.")):
        return ["embed"]
    if param_name.startswith("final_norm."):
        return ["final_norm"]
    if param_name.startswith("lm_head."):
        return ["head"]
    m = _BLOCK.match(param_name)
    if m is None:
        return []
    block = f"block_{int(m.group(1)):02d}"
    part = "attn" if m.group(2).startswith("attn") else "ffn"
    return [block, f"{block}/{part}"]


def _local(t: torch.Tensor) -> torch.Tensor:
    return t.to_local() if hasattr(t, "to_local") else t


class LayerTelemetry(L.Callback):
    """grad_norm/*, param_norm/*, update_ratio/block_XX, act_rms/* every `every` optimizer steps."""

    def __init__(
        self,
        every: int,
        act_rms: bool = True,
        figures: bool = True,
        run_dir: str | Path | None = None,
    ) -> None:
        self.every = max(1, every)
        self.act_rms = act_rms
        self.figures = figures
        self.run_dir = Path(run_dir) if run_dir else None
        self.history: list[tuple[int, dict[str, float]]] = []
        self.max_grad_norm: float | None = None
        self.last_nonfinite_groups: list[str] = []
        self._hooks: list[Any] = []
        self._acts: dict[str, torch.Tensor] = {}
        self._grad_sq: torch.Tensor | None = None
        self._before: list[torch.Tensor] | None = None

    # ---- set-up: which parameter goes to which group ------------------------------------------
    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        self._ready = False

    def _build_index(self, pl_module: L.LightningModule) -> None:
        model = pl_module.model
        self.params: list[nn.Parameter] = []
        names: list[str] = []
        for name, p in model.named_parameters():  # a tied matrix appears once, as tok_emb
            self.params.append(p)
            names.append(name)
        groups = ["total", "embed"]
        groups += [f"block_{i:02d}{s}" for i in range(len(model.blocks)) for s in ("", "/attn", "/ffn")]
        groups += ["final_norm"] if model.final_norm is not None else []
        groups += ["head"] if not model.cfg.tie_embeddings else []
        self.groups = groups
        index = {g: k for k, g in enumerate(groups)}
        member = torch.zeros(len(groups), len(names))
        for j, name in enumerate(names):
            member[index["total"], j] = 1.0
            for g in group_names(name):
                member[index[g], j] = 1.0
        self.blocks = [g for g in groups if re.fullmatch(r"block_\d+", g)]
        self.block_rows = [index[b] for b in self.blocks]
        self.sharded = any(hasattr(p, "to_local") for p in self.params)
        self.member = member.to(pl_module.device)
        self._ready = True

    def _is_log_step(self, trainer: L.Trainer) -> bool:
        # global_step counts finished optimizer steps; this matches Lightning's own log cadence
        return (trainer.global_step + 1) % self.every == 0

    def _group_sq(self, tensors: list[torch.Tensor]) -> torch.Tensor:
        norms = torch._foreach_norm([_local(t).detach() for t in tensors], 2)
        sq = torch.stack([n.float() for n in norms]).pow(2).to(self.member.device)
        return self.member @ sq

    # ---- activations: hooks live only during the forward of a log step ------------------------
    def on_train_batch_start(self, trainer: L.Trainer, pl_module: Any, batch: Any, batch_idx: int) -> None:
        if not self._ready:
            self._build_index(pl_module)
        if not (self.act_rms and self._is_log_step(trainer)) or self._hooks:
            return
        if batch_idx % trainer.accumulate_grad_batches != 0:
            return  # the first micro-batch of the step stands for the step
        blocks = pl_module.model.blocks

        def save(name: str):
            def hook(module: nn.Module, args: Any, output: Any = None) -> None:
                x = output if output is not None else args[0]
                self._acts[name] = x.detach().float().pow(2).mean()

            return hook

        self._hooks.append(blocks[0].register_forward_pre_hook(save("embed")))
        for i, block in enumerate(blocks):
            self._hooks.append(block.register_forward_hook(save(f"block_{i:02d}")))

    def on_before_backward(self, trainer: L.Trainer, pl_module: Any, loss: torch.Tensor) -> None:
        for h in self._hooks:
            h.remove()
        self._hooks.clear()

    # ---- gradients: pre-clip, after unscale -----------------------------------------------------
    def on_before_optimizer_step(self, trainer: L.Trainer, pl_module: Any, optimizer: Any) -> None:
        if not self._is_log_step(trainer):
            return
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in self.params]
        self._grad_sq = self._group_sq(grads)
        self._before = [_local(p).detach().clone() for p in self.params]

    def on_train_batch_end(
        self, trainer: L.Trainer, pl_module: Any, outputs: Any, batch: Any, i: int
    ) -> None:
        if self._grad_sq is None or self._before is None:
            return
        step = trainer.global_step - 1  # the index of the step just taken, as Lightning logs it
        with torch.no_grad():
            now = [_local(p).detach() for p in self.params]
            param_sq = self._group_sq(now)
            delta_sq = self._group_sq(torch._foreach_sub(now, self._before))
        world = trainer.world_size
        replicated = 1.0 if self.sharded else 1.0 / world  # DDP replicas: count once in the SUM
        act_keys = sorted(self._acts)
        acts = torch.stack([self._acts[k] for k in act_keys]) if act_keys else self._grad_sq.new_zeros(0)
        packed = torch.cat(
            [
                self._grad_sq * replicated,
                param_sq * replicated,
                delta_sq * replicated,
                acts.to(self._grad_sq.device) / world,
            ]
        )
        if world > 1 and dist.is_available() and dist.is_initialized():
            dist.all_reduce(packed, op=dist.ReduceOp.SUM)
        roots = packed.sqrt()
        coef = getattr(pl_module, "clip_coef", None)  # the factor clipping applied (same on every rank)
        if coef is not None:  # set by the module only when optim.grad_clip > 0
            roots = torch.cat([roots, coef.detach().reshape(1).to(roots)])
        values = roots.tolist()  # the one host sync, on log steps only
        n = len(self.groups)
        grad, param, delta = values[:n], values[n : 2 * n], values[2 * n : 3 * n]
        act, applied = values[3 * n : 3 * n + len(act_keys)], values[3 * n + len(act_keys) :]
        metrics: dict[str, float] = {f"grad_norm/{g}": v for g, v in zip(self.groups, grad, strict=True)}
        for g, v in zip(self.groups, param, strict=True):
            if g == "total" or "/" not in g:
                metrics[f"param_norm/{g}"] = v
        for row, block in zip(self.block_rows, self.blocks, strict=True):
            metrics[f"update_ratio/{block}"] = delta[row] / max(param[row], 1e-12)
        metrics.update({f"act_rms/{k}": v for k, v in zip(act_keys, act, strict=True)})
        total = metrics["grad_norm/total"]
        if applied:  # the clipping factor the module applied, not recomputed here
            metrics["grad_norm/clip_coef"] = applied[0]
        self.last_nonfinite_groups = [
            g for g, v in zip(self.groups, grad, strict=True) if v != v or v in (float("inf"),)
        ]
        if total == total:
            self.max_grad_norm = max(self.max_grad_norm or 0.0, total)
        self._grad_sq, self._before = None, None
        self._acts.clear()
        self.history.append((step, metrics))
        if trainer.global_rank == 0:
            for logger in trainer.loggers:
                logger.log_metrics(metrics, step=step)

    # ---- pictures at the end ---------------------------------------------------------------------
    def on_fit_end(self, trainer: L.Trainer, pl_module: Any) -> None:
        if not (self.figures and self.history and self.run_dir and trainer.global_rank == 0):
            return
        from gptlab.analysis.figures import depth_profile, grad_heatmap

        out = self.run_dir / "figures"
        out.mkdir(parents=True, exist_ok=True)
        steps = [s for s, _ in self.history]
        matrix = [[m.get(f"grad_norm/{b}", float("nan")) for _, m in self.history] for b in self.blocks]
        heat = grad_heatmap(matrix, steps, out / "grad_norm_heatmap.png")
        prof = depth_profile(matrix, steps, out / "grad_norm_depth_profile.png")
        for logger in trainer.loggers:
            if type(logger).__name__ == "WandbLogger":
                logger.log_image(key="telemetry/grad_norm_heatmap", images=[str(heat)])
                logger.log_image(key="telemetry/grad_norm_depth_profile", images=[str(prof)])
