"""Non-finite gradients: drop the bad step's update, then stop or go on (callbacks.on_nonfinite).

Two halves. `NonFiniteGuard` runs inside the LightningModule's gradient-clipping hook, after backward
and before `optimizer.step`, every step. It takes the per-parameter gradient norms (one fused
`_foreach_norm`; the global norm that clipping needs is computed from them, so the check costs no
extra pass over the gradients), and records on the device, without a host sync, whether the step was
bad, how many were, and which step and parameters were bad first/last. Under both policies the bad
update is dropped, so the weights never take a NaN:

- fused AdamW (what `build_adamw` uses on CUDA and CPU): the flag goes to the optimizer as
  `found_inf`, the same mechanism GradScaler uses; the fused kernel then leaves parameters, both
  moments and the step count untouched. No host sync. optim.name=muon likewise
  (`MuonAdamW.takes_found_inf`: fused AdamW, and Muon keeping weights and momentum by `torch.where`
  on the flag).
- any other optimizer: the flag is read on the host and, when set, every `.grad` is set to None,
  which makes `optimizer.step` skip every parameter (state untouched). On a CPU nothing is queued
  asynchronously, so that read costs nothing; on a GPU with a non-fused optimizer it is one sync/step.

`NonFiniteMonitor` (a callback) reads the device counters on the host only where that is free or rare:
every step on CPU, on log steps on a GPU (Lightning syncs there anyway), before each checkpoint is
written, and at the end of training. `stop` raises `NonFiniteError` naming the step and the layers;
raising from `on_save_checkpoint` means no checkpoint is written after a bad step, so the last good one
stays. `skip` warns. Both log `train/skipped_steps`: every update dropped so far, for non-finite
gradients and by the spike policy (callbacks.spikes.on_spike=skip, counted by SpikeWatch). Under fp16
AMP (`16-mixed`) GradScaler already skips overflowing steps (routinely, while it calibrates its scale),
and the guard stays out of its way.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

import lightning as L
import torch
from torch import nn

from gptlab.training.callbacks.groups import group_names, local

log = logging.getLogger(__name__)
POLICIES = ("stop", "skip")
EXIT_NONFINITE = 3


class NonFiniteError(RuntimeError):
    """Training stopped on a non-finite gradient; the message is one line naming step and layers."""


def global_norm(grads: list[torch.Tensor]) -> torch.Tensor:
    """Global L2 norm of the gradients; under FSDP2 the partial DTensor total is made whole."""
    total = torch.nn.utils.get_total_norm(grads, norm_type=2.0, foreach=True)
    return total.full_tensor() if hasattr(total, "full_tensor") else total


class NonFiniteGuard:
    """Device-side record of non-finite steps, and the drop of such a step's optimizer update."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.count: torch.Tensor | None = None  # float, number of dropped updates
        self.first_step: torch.Tensor | None = None  # long, -1 while none
        self.first_mask: torch.Tensor | None = None  # bool per parameter, of the first bad step
        self.last_step: torch.Tensor | None = None
        self.last_mask: torch.Tensor | None = None
        # the last step's per-parameter local gradient norms (pre-clip), and that step: telemetry
        # reads them on its log steps instead of norming the gradients a second time
        self.per_param: torch.Tensor | None = None
        self.per_param_step = -1

    def total_norm(
        self, named_params: Iterable[tuple[str, nn.Parameter]], optimizer: Any, step: int
    ) -> torch.Tensor:
        """The global pre-clip L2 norm; drops the update if it is not finite. (Clipping takes the
        parameters, not their gradients: `clip_grads_with_norm_` scales the `.grad` of what it gets.)"""
        params = [(n, p) for n, p in named_params if p.grad is not None]
        grads = [p.grad for _, p in params]
        if not grads:
            return torch.zeros(())
        norms = torch._foreach_norm([local(g) for g in grads], 2.0)
        # local shards under FSDP; one cast of the stack (exact, as each norm's own cast was)
        per_param = torch.stack(norms).float()
        self.per_param, self.per_param_step = per_param, step
        if any(hasattr(g, "full_tensor") for g in grads):  # FSDP2: the total must span the shards
            total = global_norm(grads)
        else:
            total = torch.linalg.vector_norm(per_param, 2.0)
        bad = ~torch.isfinite(total)
        self._record([n for n, _ in params], step, bad, per_param)
        drop_update(optimizer, [p for _, p in params], bad)
        return total

    def _record(self, names: list[str], step: int, bad: torch.Tensor, per_param: torch.Tensor) -> None:
        mask = ~torch.isfinite(per_param)
        if self.count is None or names != self.names or self.first_mask is None:
            device = bad.device
            self.names = names
            self.count = torch.zeros((), device=device)
            self.first_step = torch.full((), -1, dtype=torch.long, device=device)
            self.last_step = torch.full((), -1, dtype=torch.long, device=device)
            self.first_mask = torch.zeros(len(names), dtype=torch.bool, device=device)
            self.last_mask = torch.zeros(len(names), dtype=torch.bool, device=device)
        first = bad & (self.first_step < 0)
        self.count += bad.float()
        self.first_step = torch.where(first, step, self.first_step)  # a Python int: no tensor made
        self.first_mask = torch.where(first, mask, self.first_mask)
        self.last_step = torch.where(bad, step, self.last_step)
        self.last_mask = torch.where(bad, mask, self.last_mask)

    def seen(self) -> int:
        """Dropped updates so far (a host read)."""
        return 0 if self.count is None else int(self.count.item())

    def describe(self, which: str = "first") -> tuple[int, list[str], list[str]]:
        """(step, layer groups, parameter names) of the first or last bad step (a host read)."""
        step_t, mask_t = (
            (self.first_step, self.first_mask) if which == "first" else (self.last_step, self.last_mask)
        )
        if step_t is None or mask_t is None:
            return -1, [], []
        mask = mask_t
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            mask = mask.to(torch.uint8)  # FSDP: each rank sees its own shards; any rank's NaN counts
            torch.distributed.all_reduce(mask, op=torch.distributed.ReduceOp.MAX)
        names = [n for n, m in zip(self.names, mask.tolist(), strict=True) if m]
        groups: list[str] = []
        for n in names:
            found = group_names(n)
            groups.append(found[-1] if found else n)
        return int(step_t.item()), list(dict.fromkeys(groups)), names


def drop_update(optimizer: Any, params: list[nn.Parameter], bad: torch.Tensor, also: bool = False) -> None:
    """Make the coming `optimizer.step` leave weights and state untouched if `bad` (a bool tensor) is
    set. Fused AdamW reads `found_inf` (GradScaler's mechanism, no host sync): the guard sets it
    afresh every step; `also=True` (the spike policy, later in the same step) only adds to it. Any
    other optimizer skips the parameters whose `.grad` is None."""
    opt = getattr(optimizer, "optimizer", optimizer)  # LightningOptimizer wraps the torch one
    fused = getattr(opt, "defaults", {}).get("fused") and getattr(opt, "_step_supports_amp_scaling", False)
    if fused or getattr(opt, "takes_found_inf", False):  # fused AdamW; MuonAdamW with it (optim.py)
        flag, before = bad.float(), getattr(opt, "found_inf", None)
        opt.found_inf = torch.maximum(flag, before.to(flag)) if also and before is not None else flag
    elif bool(bad):  # host read: free on CPU; one sync per step on a GPU without fused AdamW
        for p in params:
            p.grad = None


def spike_drops(trainer: L.Trainer) -> int:
    """Updates dropped by the spike policy so far (SpikeWatch counts them, across a resume too)."""
    from gptlab.training.callbacks.spikes import SpikeWatch

    return sum(c.dropped for c in trainer.callbacks if isinstance(c, SpikeWatch))


def _listing(items: list[str], limit: int = 4) -> str:
    shown = ", ".join(items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")


class NonFiniteMonitor(L.Callback):
    """Applies callbacks.on_nonfinite: `stop` raises NonFiniteError, `skip` warns and counts."""

    def __init__(self, policy: str = "stop", every: int = 1) -> None:
        if policy not in POLICIES:
            raise ValueError(
                f"callbacks.on_nonfinite={policy!r} is not accepted; choose one of {', '.join(POLICIES)}"
            )
        self.policy = policy
        self.every = max(1, every)
        self.reported = 0  # bad steps of this process already acted on
        self.before = 0  # steps skipped before the checkpoint this run resumed from

    def state_dict(self) -> dict[str, Any]:
        """The skipped-step count, so train/skipped_steps keeps counting across a resume."""
        return {"skipped": self.before + self.reported}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.before = int(state_dict.get("skipped", 0))

    @staticmethod
    def _guard(pl_module: Any) -> NonFiniteGuard | None:
        return getattr(pl_module, "nonfinite", None)

    def on_train_batch_end(
        self, trainer: L.Trainer, pl_module: Any, outputs: Any, batch: Any, i: int
    ) -> None:
        guard = self._guard(pl_module)
        if guard is None or guard.count is None:
            return
        if trainer._logger_connector.should_update_logs:  # self.log costs ~1 ms of Python a call
            # a device tensor: Lightning reads it on log steps only
            pl_module.log("train/skipped_steps", guard.count + (self.before + spike_drops(trainer)))
        if pl_module.device.type == "cpu" or trainer.global_step % self.every == 0:
            self.check(trainer, pl_module)

    def on_save_checkpoint(self, trainer: L.Trainer, pl_module: Any, checkpoint: dict[str, Any]) -> None:
        if self.policy == "stop":
            self.check(trainer, pl_module)  # before the file is written: the last good one stays

    def on_train_end(self, trainer: L.Trainer, pl_module: Any) -> None:
        self.check(trainer, pl_module)
        if self.reported and trainer.is_global_zero:
            log.warning("%d optimizer step(s) were skipped for non-finite gradients", self.reported)

    def check(self, trainer: L.Trainer, pl_module: Any) -> None:
        """Read the device counters; stop or warn on new bad steps."""
        guard = self._guard(pl_module)
        if guard is None:
            return
        count = guard.seen()
        if count <= self.reported:
            return
        if self.policy == "stop":
            step, groups, names = guard.describe("first")
            last = getattr(trainer.checkpoint_callback, "last_model_path", "") or ""
            kept = f"the last good checkpoint is {last}" if last else "no checkpoint was written before it"
            raise NonFiniteError(
                f"non-finite gradient at step {step} in {_listing(groups)} ({_listing(names)}); "
                f"stopped by callbacks.on_nonfinite=stop without applying that update; {kept}; "
                "callbacks.on_nonfinite=skip drops such steps and goes on"
            )
        step, groups, names = guard.describe("last")  # every rank: a collective under FSDP
        self.reported = count
        if not trainer.is_global_zero:
            return
        log.warning(
            "non-finite gradient at step %d in %s (%s): update skipped (callbacks.on_nonfinite=skip), "
            "%d skipped so far",
            step,
            _listing(groups),
            _listing(names),
            count,
        )
