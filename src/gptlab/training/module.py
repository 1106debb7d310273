"""The LightningModule: next-token loss, metrics, AdamW + schedule, and clipping that is right on DTensors."""

from __future__ import annotations

import math
from typing import Any

import lightning as L
import torch
import torch.nn.functional as F

from gptlab.config import OptimConfig
from gptlab.model import GPT, GPTConfig
from gptlab.training.callbacks.nonfinite import NonFiniteGuard, global_norm
from gptlab.training.checkpoint_io import check_resumable
from gptlab.training.optim import build_adamw, lr_factor


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
    ) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.model_cfg = GPTConfig.from_dict(dict(model))
        self.optim_cfg = OptimConfig(**optim)
        self.model = GPT(self.model_cfg)
        self.bytes_per_token = bytes_per_token
        self._val_losses: list[torch.Tensor] = []
        self.last_loss: torch.Tensor | None = None  # the last training step's loss, on the device
        self.nonfinite = NonFiniteGuard()  # drops the update of a step with NaN/inf gradients

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """A checkpoint of another architecture fails here in one line, not in load_state_dict."""
        path = getattr(self._trainer, "ckpt_path", None)
        check_resumable(checkpoint, self, f"ckpt_path={str(path)!r}" if path else "the checkpoint")

    def configure_model(self) -> None:
        """Apply FSDP2 sharding (trainer.strategy=fsdp) and torch.compile, outside the model code."""
        from gptlab.training.strategies import parallelize

        parallelize(self, self.hparams.get("fsdp"), compile_model=bool(self.hparams.get("compile")))

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return self.model(idx)

    def _loss(self, batch: torch.Tensor) -> torch.Tensor:
        x, y = batch[:, :-1], batch[:, 1:]
        logits = self.model(x)
        return F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), y.reshape(-1))

    def training_step(self, batch: torch.Tensor, batch_idx: int) -> torch.Tensor:
        loss = self._loss(batch)
        self.last_loss = loss.detach()  # callbacks/progress.py reads it when the bar redraws
        # not prog_bar=True: Lightning turns progress-bar metrics into Python numbers after every
        # batch (a host-device sync per step). Only on steps the loggers write: each self.log costs
        # ~1 ms of Python (Lightning moves its result state on every call), the step's real work
        # on a small model or a fast GPU.
        if self._logs_now():
            self.log("train/loss", self._global_loss(loss.detach()))
        return loss

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
        tokens = (
            (trainer.global_step)
            * trainer.accumulate_grad_batches
            * batch.shape[0]
            * (batch.shape[1] - 1)
            * trainer.world_size
        )
        # CPU tensors: self.log(<python float>) builds a tensor on self.device, which on a GPU is a
        # blocking host-to-device copy every step; float64 keeps token counts exact past 2^24
        self.log("tokens_seen", torch.tensor(float(tokens), dtype=torch.float64))
        self.log("lr", torch.tensor(float(self.lr_schedulers().get_last_lr()[0])))

    def validation_step(self, batch: torch.Tensor, batch_idx: int) -> None:
        self._val_losses.append(self._loss(batch).detach())

    def on_validation_epoch_end(self) -> None:
        if not self._val_losses:
            return
        loss = torch.stack(self._val_losses).mean()
        self._val_losses.clear()
        loss = self.trainer.strategy.reduce(loss, reduce_op="mean")  # equal shards: mean of means
        # already reduced; sync_dist only silences Lightning's warning (a mean of equal values)
        self.log("val/loss", loss, prog_bar=True, sync_dist=True)
        self.log("val/ppl", torch.exp(loss), sync_dist=True)
        self.log("val/bpb", loss / math.log(2) / self.bytes_per_token, sync_dist=True)

    def configure_optimizers(self) -> dict[str, Any]:
        opt = build_adamw(self.model, self.optim_cfg, self.device.type)
        schedule = torch.optim.lr_scheduler.LambdaLR(opt, lr_factor(self.optim_cfg, self.trainer.max_steps))
        return {"optimizer": opt, "lr_scheduler": {"scheduler": schedule, "interval": "step"}}

    def configure_gradient_clipping(self, optimizer: torch.optim.Optimizer, *args: Any, **kw: Any) -> None:
        """Clip by the global norm (under FSDP2 the total is a partial DTensor: take the full value).

        The norm is taken every step, clipping on or off: a non-finite norm drops this step's update
        (callbacks/nonfinite.py). Under fp16 AMP, GradScaler does that itself.
        """
        if getattr(self.trainer.precision_plugin, "scaler", None) is not None:
            if self.optim_cfg.grad_clip <= 0:
                return
            grads = [p.grad for p in self.model.parameters() if p.grad is not None]
            total = global_norm(grads)
        else:
            named = self.model.named_parameters()
            total, grads = self.nonfinite.total_norm(named, optimizer, self.global_step)
        if self.optim_cfg.grad_clip > 0:
            torch.nn.utils.clip_grads_with_norm_(grads, self.optim_cfg.grad_clip, total, foreach=True)
