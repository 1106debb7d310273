"""The LightningModule: next-token loss, metrics, AdamW or Muon + schedule, clipping right on DTensors."""

from __future__ import annotations

from typing import Any

import lightning as L
import torch
import torch.nn.functional as F

from gptlab.config import OptimConfig
from gptlab.evaluation.validation import loss_sum_and_count, val_metrics
from gptlab.model import GPT, GPTConfig, moe
from gptlab.model.masks import Documents
from gptlab.training.callbacks.nonfinite import NonFiniteGuard, drop_update, global_norm
from gptlab.training.callbacks.throughput import tokens_per_step
from gptlab.training.checkpoint_io import check_resumable, check_same_optimizer
from gptlab.training.loss import LossFn, loss_fn, token_losses
from gptlab.training.optim import build_optimizer, lr_factor
from gptlab.training.schedules import apply_schedule


class GPTLightningModule(L.LightningModule):
    """Wraps GPT for training; hyper-parameters are plain dicts so checkpoints load with weights_only."""

    def __init__(
        self,
        model: dict[str, Any],
        optim: dict[str, Any],
        bytes_per_token: float = 1.0,
        compile: bool = False,
        fsdp: dict[str, Any] | None = None,
        tokenizer: dict[str, Any] | None = None,
        documents: dict[str, Any] | None = None,
    ) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.model_cfg = GPTConfig.from_dict(dict(model))
        self.optim_cfg = OptimConfig(**optim)
        # data.document_mask (data/documents.py): the eot id and positions; None: windows see across
        self.model = GPT(self.model_cfg, Documents(**documents) if documents else None)
        # whether any FFN is a mixture of experts: a dense model's step skips the routing terms'
        # walks over its modules (docs/performance.md, "Short runs": pure per-step overhead)
        self.has_moe = any(self.model_cfg.is_moe(i) for i in range(self.model_cfg.n_layer))
        self.bytes_per_token = bytes_per_token
        self._val_sums: list[torch.Tensor] = []  # [Σ token loss, token count] per val batch
        self.last_loss: torch.Tensor | None = None  # the last training step's loss, on the device
        self.nonfinite = NonFiniteGuard()  # drops the update of a step with NaN/inf gradients
        self._clip_total: torch.Tensor | None = None  # the last clipped step's pre-clip global norm
        self._step_loss_sum: torch.Tensor | None = None  # this optimizer step's micro-batch losses
        self._step_lr = 0.0  # the LR of the step in progress
        self.last_ce: torch.Tensor | None = None  # the last micro-batch's cross-entropy (no z-loss)
        self.last_z: torch.Tensor | None = None  # and its mean log²Z, when optim.z_loss > 0
        self.last_routing: torch.Tensor | None = None  # model/ffn=moe: the routers' penalty (model/moe.py)
        # telemetry sets want_logit_stats for one micro-batch of a log step; _loss then leaves
        # [Σ logit, Σ logit², max logit, Σ log Z, logits, tokens] (float64, on the device) here
        self.want_logit_stats = False
        self.logit_stats: torch.Tensor | None = None
        self.skip_update = False  # set by the spike callback (on_spike=skip): drop this step's update
        self._loss_fn: LossFn = token_losses  # configure_model compiles it with the blocks

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """A checkpoint of another architecture fails here in one line, not in load_state_dict."""
        path = getattr(self._trainer, "ckpt_path", None)
        where = f"ckpt_path={str(path)!r}" if path else "the checkpoint"
        check_resumable(checkpoint, self, where)
        check_same_optimizer(checkpoint, self.optim_cfg.name, where)

    def on_train_start(self) -> None:
        """After a checkpoint's load, this run's own schedule at the restored step (a decay branch's
        first LR: training/schedules.py)."""
        apply_schedule([c.scheduler for c in self.trainer.lr_scheduler_configs])

    def configure_model(self) -> None:
        """Apply FSDP2 sharding (trainer.strategy=fsdp) and torch.compile, outside the model code."""
        from gptlab.training.strategies import parallelize

        compiled = bool(self.hparams.get("compile"))
        parallelize(self, self.hparams.get("fsdp"), compile_model=compiled)
        self._loss_fn = loss_fn(compiled)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return self.model(idx)

    def _loss(self, batch: torch.Tensor) -> torch.Tensor:
        """The training objective: the tokens' (below), plus MoE's routing losses (the routers' aux
        and z losses, with their coefficients) when the FFNs are experts."""
        objective = self._token_objective(batch[:, :-1], batch[:, 1:])
        if not self.has_moe:
            return objective
        routing = moe.routing_loss(self.model)
        if routing is not None:
            self.last_routing = routing.detach()
            objective = objective + routing
        return objective

    def _token_objective(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Next-token cross-entropy, plus optim.z_loss · mean(log²Z) where log Z = logsumexp of a
        position's logits (PaLM's z-loss: it keeps log Z near 0)."""
        coef = self.optim_cfg.z_loss
        if not self.want_logit_stats:  # compiled with the blocks under `compile`
            ce, z = self._loss_fn(self.model(x), y, coef)
            self.last_ce = ce.detach()
            if z is None:
                return ce
            self.last_z = z.detach()
            return ce + coef * z
        # the model's (bf16 under autocast) logits die once cast: only the fp32 copy lives through
        # the loss and a log step's logit moments, N·V·2 bytes less at the forward's peak
        flat = self.model(x).float()
        flat = flat.reshape(-1, flat.size(-1))
        ce = F.cross_entropy(flat, y.reshape(-1))
        self.last_ce = ce.detach()
        log_z = torch.logsumexp(flat, dim=-1) if coef > 0 or self.want_logit_stats else None
        if self.want_logit_stats and log_z is not None:
            self.logit_stats = logit_moments(flat.detach(), log_z.detach())
        if coef > 0 and log_z is not None:
            z = log_z.pow(2).mean()
            self.last_z = z.detach()
            return ce + z * coef  # the log step (telemetry) path
        return ce

    def training_step(self, batch: torch.Tensor, batch_idx: int) -> torch.Tensor:
        self._step_lr = float(self.optimizers().param_groups[0]["lr"])  # a Python float: no sync
        objective = self._loss(batch)
        # the expert bias moves on this step's loads (balance=bias); telemetry reads its routing sums
        if self.has_moe:
            moe.accumulate_load(self.model, fresh=batch_idx % self.trainer.accumulate_grad_batches == 0)
        loss = self.last_ce if self.last_ce is not None else objective.detach()  # train/loss: CE only
        self.last_loss = loss  # callbacks/progress.py reads it when the bar redraws
        # not prog_bar=True: Lightning turns progress-bar metrics into Python numbers after every
        # batch (a host-device sync per step). Only on steps the loggers write: each self.log costs
        # ~1 ms of Python (Lightning moves its result state on every call), the step's real work
        # on a small model or a fast GPU.
        if self._logs_now():
            # Lightning writes the value logged at the step's last micro-batch: log the mean of all
            # of the step's micro-batches (they hold equal token counts) there
            done = self._step_loss_sum
            self._step_loss_sum = loss.detach() if done is None else done + loss.detach()
            accumulate = self.trainer.accumulate_grad_batches
            if (batch_idx + 1) % accumulate == 0:
                step_loss, self._step_loss_sum = self._step_loss_sum / accumulate, None
                self.log("train/loss", self._global_loss(step_loss))
                if self.last_z is not None:  # this micro-batch's: a log of the term, not an average
                    self.log("train/z_loss", self._global_loss(self.last_z))
                if self.last_routing is not None:  # likewise; the terms before their coefficients
                    for name, value in moe.routing_terms(self.model).items():
                        self.log(f"train/{name}", self._global_loss(value))
        return objective

    def _logs_now(self) -> bool:
        """Whether this step's logged values reach the loggers (Lightning's own test, the one its
        LearningRateMonitor uses; true without a trainer's logger connector)."""
        connector = getattr(self.trainer, "_logger_connector", None)
        return True if connector is None else bool(connector.should_update_logs)

    def _global_loss(self, loss: torch.Tensor) -> torch.Tensor:
        """The mean loss over all ranks: one all-reduce, on logged steps only (every rank agrees
        on those). Not `sync_dist=True`, which all-reduces on every step, logged or not. Ranks
        hold equal micro-batches, so the mean of their means is the global batch's mean."""
        if self.trainer.world_size == 1:
            return loss
        return self.trainer.strategy.reduce(loss.clone(), reduce_op="mean")  # reduces in place

    def on_train_batch_end(self, outputs: Any, batch: torch.Tensor, batch_idx: int) -> None:
        trainer = self.trainer
        if not (self._logs_now() or 0 < trainer.max_steps <= trainer.global_step):
            return  # the last step too: RunSummary reads the final tokens_seen
        step_tokens = tokens_per_step(
            batch.shape[0], batch.shape[1] - 1, trainer.accumulate_grad_batches, trainer.world_size
        )
        tokens = trainer.global_step * step_tokens
        # CPU tensors: self.log(<python float>) builds a tensor on self.device, which on a GPU is a
        # blocking host-to-device copy every step; float64 keeps token counts exact past 2^24
        self.log("tokens_seen", torch.tensor(float(tokens), dtype=torch.float64))
        # the LR this step's update used: the schedule has already stepped to the next one here
        self.log("lr", torch.tensor(self._step_lr))

    def validation_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> None:
        """Keep this batch's [Σ token loss, token count]; padding windows weigh 0 (datamodule.py)."""
        tokens, weight = batch
        self._val_sums.append(loss_sum_and_count(self.model, tokens, weight).detach())

    def _val_totals(self) -> torch.Tensor:
        """[Σ loss, count] over this rank's batches, then SUM over ranks: each window counts once."""
        totals = torch.stack(self._val_sums).sum(dim=0)
        self._val_sums.clear()
        if self.trainer.world_size > 1:
            totals = self.trainer.strategy.reduce(totals, reduce_op="sum")
        return totals

    def on_validation_epoch_end(self) -> None:
        if not self._val_sums:
            return
        metrics = val_metrics(self._val_totals(), self.bytes_per_token)
        for name, value in metrics.items():
            # already global; sync_dist only silences Lightning's warning (max of equal values: exact)
            self.log(name, value, prog_bar=name == "val/loss", sync_dist=True, reduce_fx="max")

    def configure_optimizers(self) -> dict[str, Any]:
        opt = build_optimizer(self.model, self.optim_cfg, self.device.type)
        if any(layer.mcfg.balance == "bias" for layer in moe.moe_layers(self.model)):
            opt.register_step_post_hook(lambda *_: moe.update_expert_bias(self.model))
        schedule = torch.optim.lr_scheduler.LambdaLR(opt, lr_factor(self.optim_cfg, self.trainer.max_steps))
        return {"optimizer": opt, "lr_scheduler": {"scheduler": schedule, "interval": "step"}}

    def configure_gradient_clipping(self, optimizer: torch.optim.Optimizer, *args: Any, **kw: Any) -> None:
        """Clip by the global norm (under FSDP2 the total is a partial DTensor: take the full value).

        The norm is taken every step, clipping on or off: a non-finite norm drops this step's update
        (callbacks/nonfinite.py). Under fp16 AMP, GradScaler does that itself. `clip_coef` keeps the
        factor applied to the gradients (1 when they were within the bound), on the device; telemetry
        logs it on log steps.
        """
        named = [(n, p) for n, p in self.model.named_parameters() if p.grad is not None]  # one walk
        params = [p for _, p in named]
        self._clip(optimizer, named, params)
        if self.skip_update:  # the spike policy (callbacks/spikes.py): the non-finite guard's drop
            self.skip_update = False
            drop_update(optimizer, params, torch.ones((), dtype=torch.bool, device=self.device), also=True)

    def _clip(
        self,
        optimizer: torch.optim.Optimizer,
        named: list[tuple[str, torch.nn.Parameter]],
        params: list[torch.nn.Parameter],
    ) -> None:
        if getattr(self.trainer.precision_plugin, "scaler", None) is not None:
            if self.optim_cfg.grad_clip <= 0:
                return
            total = global_norm([p.grad for p in params])
        else:
            total = self.nonfinite.total_norm(named, optimizer, self.global_step)
        if self.optim_cfg.grad_clip > 0 and params:
            # clip_grads_with_norm_ takes the *parameters* and scales their .grad in place, by
            # max_norm / (total + 1e-6) clamped to 1
            torch.nn.utils.clip_grads_with_norm_(params, self.optim_cfg.grad_clip, total, foreach=True)
            self._clip_total = total.detach()

    @property
    def clip_coef(self) -> torch.Tensor | None:
        """The factor the last clipped step applied (torch's formula, recomputed from its norm when
        read: telemetry reads it on log steps only, so other steps pay no op for it); None when none."""
        total = self._clip_total
        return None if total is None else torch.clamp(self.optim_cfg.grad_clip / (total + 1e-6), max=1.0)


def logit_moments(flat: torch.Tensor, log_z: torch.Tensor) -> torch.Tensor:
    """[Σ x, Σ x², max x, Σ log Z, number of logits, number of positions] of (N, V) logits, float64
    sums (a mean and std over ~10⁸ logits), on the device: telemetry reduces them over ranks.

    Each position's Σ x and ‖x‖ in float32 (vectorised passes over the logits that write nothing
    of their size), then float64 over the N positions: float32 rounding within a row of V logits,
    none across rows. A float64 sum of the N·V logits themselves (or of a squared copy) costs
    ~50 ms per pass at GPT-2's (256, 50257), 25 times these (docs/performance.md, Telemetry cost)."""
    return torch.stack(
        [
            flat.sum(dim=-1).sum(dtype=torch.float64),
            torch.linalg.vector_norm(flat, dim=-1).double().pow(2).sum(),
            flat.max().double(),
            log_z.sum(dtype=torch.float64),
            torch.tensor(float(flat.numel()), dtype=torch.float64, device=flat.device),
            torch.tensor(float(log_z.numel()), dtype=torch.float64, device=flat.device),
        ]
    )
