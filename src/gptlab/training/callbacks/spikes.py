"""Loss-spike forensics: catch a step whose loss jumps above its running average, and keep the evidence.

The training loss (cross-entropy, the global mean under DDP/FSDP) is watched against an exponential
moving average (decay `ema_decay`, ~1/(1-decay) steps) and a noise level σ, the exponentially weighted
RMS of its step-to-step differences over √2 (a σ of the loss itself would count the early fall of
the loss as noise). After `warmup_steps`, a step whose loss exceeds EMA + `threshold`·σ is a spike.
A spike does not move the EMA or σ (it would hide the next one), so a lasting level shift would make
every later step a spike: after `max_consecutive` spike steps in a row, the next step above the bound
is taken as the loss's new level instead, not a spike (one warning says so): its update is applied and
the EMA restarts at its loss (σ, the noise level, is kept). On a spike at step N:

- LayerTelemetry logs steps N and N+1 whatever its cadence (`force`); step N's forward-side numbers
  (act_rms, attention logits, output logits) come from a second forward of step N's last micro-batch,
  with the same weights and RNG state (not under FSDP: there, from step N+1 only);
- `spikes/step_<N>.json` gets the loss, EMA, σ, the per-block telemetry of N and N+1, the blocks whose
  gradient norm jumped most, under model/ffn=moe the MoE layers whose max/mean load jumped most
  (`routers`: the router's layer, its load ratio, entropy, dead experts, aux and z losses), and the
  windows of the step's global batch (in stream order), with what reads them back (`token_file`,
  `dtype`, `block_size`; for `data.source=tokens`, `segments` of the user's shards instead of one
  file, concatenated in order)::

      python -c "import json,numpy as np; r=json.load(open('spikes/step_120.json')); d=r['data']; \\
      t=np.memmap(d['token_file'],dtype=d['dtype'],mode='r'); b=d['block_size']; \\
      print(np.stack([t[w*b:w*b+b+1] for w in r['windows']]))"

- `on_spike=skip` also drops the step's update (the non-finite guard's mechanism: `found_inf` for
  fused AdamW, `.grad = None` otherwise), at most `max_consecutive` in a row; the updates dropped
  count in `train/skipped_steps` (NonFiniteMonitor logs it); `record` (the default) only records.

metrics.json gets `n_spikes`, `spike_steps`, `first_spike_step`, `first_spike_blocks`,
`first_spike_routers`, `spike_updates_dropped` and `spike_rebaseline_steps` (RunSummary reads
`summary_fields`). No host sync:
on a CPU the loss is read every step (free there); on a GPU it is copied to pinned memory asynchronously
behind a CUDA event, and each step's loss is judged, in step order, once its event has completed:
usually one step late, so there a record's telemetry (`telemetry_steps`) is of the step the host is on
and the next, and `skip` drops that step's update. A loss still in flight `MAX_LATE` steps later is
waited for (`event.synchronize()`, a host wait only when the host runs that far ahead): every step is
judged, none dropped. The losses still in flight at the end of training are judged then (recorded, no
update left to drop). Tested on CPU with an event that completes late (tests/training/callbacks/
test_spike_late_events.py). Under DDP/FSDP one scalar all-reduce per step;
`callbacks.spikes.enabled=false` removes it all.
"""

from __future__ import annotations

import collections
import copy
import logging
import math
from pathlib import Path
from typing import Any

import lightning as L
import torch

from gptlab.training.callbacks import spike_culprits as culprits

log = logging.getLogger(__name__)
SPIKE_POLICIES = ("record", "skip")
MAX_LATE = 3  # GPU: a step's loss not yet copied back this many steps later is waited for


class SpikeWatch(L.Callback):
    """Detects loss spikes against an EMA; records them (and, with on_spike=skip, drops the update)."""

    def __init__(
        self,
        run_dir: str | Path | None,
        threshold: float = 6.0,
        ema_decay: float = 0.95,
        warmup_steps: int = 50,
        on_spike: str = "record",
        max_records: int = 20,
        max_consecutive: int = 5,
    ) -> None:
        if on_spike not in SPIKE_POLICIES:
            raise ValueError(
                f"callbacks.spikes.on_spike={on_spike!r} is not accepted; choose one of "
                f"{', '.join(SPIKE_POLICIES)}"
            )
        self.dir = Path(run_dir) / "spikes" if run_dir else None
        self.threshold, self.decay, self.warmup = threshold, ema_decay, warmup_steps
        self.on_spike, self.max_records = on_spike, max_records
        self.max_consecutive = max(1, max_consecutive)
        self.in_a_row = 0  # spike steps since the last step within the bound
        self.dropped = 0  # updates dropped by on_spike=skip (kept across a resume)
        self.rebaselines: list[int] = []  # steps taken as a new level after max_consecutive spikes
        self.ema: float | None = None
        self.var = 0.0
        self.last = 0.0  # the previous non-spike step's loss
        self.seen = 0  # steps folded into the EMA
        self.spikes: list[dict[str, Any]] = []  # every spike (the first max_records get a file)
        self._pending: list[dict[str, Any]] = []  # records waiting for step N+1's telemetry
        self._loss_sum: torch.Tensor | None = None
        self._batch: Any = None
        self._batch_idx = 0
        # GPU: (step, pinned loss, its CUDA event) per step not yet judged, oldest first
        self._inflight: collections.deque[tuple[int, torch.Tensor, Any]] = collections.deque()

    def state_dict(self) -> dict[str, Any]:
        """The EMA state, so a resumed run keeps watching from where it was."""
        return {
            "ema": self.ema,
            "var": self.var,
            "last": self.last,
            "seen": self.seen,
            "in_a_row": self.in_a_row,
            "dropped": self.dropped,
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.ema, self.var = state_dict.get("ema"), float(state_dict.get("var", 0.0))
        self.seen, self.last = int(state_dict.get("seen", 0)), float(state_dict.get("last", 0.0))
        self.in_a_row, self.dropped = int(state_dict.get("in_a_row", 0)), int(state_dict.get("dropped", 0))

    @staticmethod
    def _telemetry(trainer: L.Trainer) -> Any:
        from gptlab.training.callbacks.telemetry import LayerTelemetry

        return next((c for c in trainer.callbacks if isinstance(c, LayerTelemetry)), None)

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: Any, batch: Any, batch_idx: int) -> None:
        self._batch, self._batch_idx = batch, batch_idx

    def on_before_backward(self, trainer: L.Trainer, pl_module: Any, loss: torch.Tensor) -> None:
        ce = pl_module.last_loss
        if ce is None:
            return
        self._loss_sum = ce.detach() if self._loss_sum is None else self._loss_sum + ce.detach()
        accumulate = trainer.accumulate_grad_batches
        if (self._batch_idx + 1) % accumulate != 0:
            return
        step_loss, self._loss_sum = self._loss_sum / accumulate, None
        if trainer.world_size > 1:  # every rank must agree on a spike: telemetry's reductions follow
            step_loss = trainer.strategy.reduce(step_loss.clone(), reduce_op="mean")
        for step, value in self._read(step_loss, trainer.global_step):
            self._judge(trainer, pl_module, step, value)

    def _judge(
        self, trainer: L.Trainer, pl_module: Any, step: int, value: float, can_drop: bool = True
    ) -> None:
        """One step's loss against the EMA: a spike, a new level after a row of them, or folded in."""
        if not math.isfinite(value):
            return  # the non-finite guard's business
        if self.ema is not None and self.seen >= self.warmup:
            sigma = math.sqrt(self.var)
            if sigma > 0 and value > self.ema + self.threshold * sigma:
                if self.in_a_row < self.max_consecutive:
                    self.in_a_row += 1
                    self._spike(trainer, pl_module, step, value, sigma, can_drop)
                    return
                self._rebaseline(trainer, step, value, sigma)
                return
        self.in_a_row = 0
        if self.ema is None:
            self.ema = value
        else:
            # σ from one-step differences (var(Δ)/2 for independent noise): the fast early fall of
            # the loss is a trend, and a trend barely enters its differences
            diff = value - self.last
            self.var = self.decay * self.var + (1 - self.decay) * diff * diff / 2
            self.ema += (1 - self.decay) * (value - self.ema)
        self.last = value
        self.seen += 1

    def _rebaseline(self, trainer: L.Trainer, step: int, value: float, sigma: float) -> None:
        """The step after `max_consecutive` spikes in a row: a new level, not a spike. Its update is
        applied, and the EMA restarts at its loss (σ is kept: the noise did not change)."""
        assert self.ema is not None
        if trainer.is_global_zero:
            log.warning(
                "loss at step %d (%.4g vs EMA %.4g, %.1fσ) follows %d spike steps in a row "
                "(callbacks.spikes.max_consecutive): taken as the loss's new level, its update applied%s; "
                "the EMA restarts at %.4g",
                step,
                value,
                self.ema,
                (value - self.ema) / sigma,
                self.in_a_row,
                "" if self.on_spike == "record" else " (on_spike=skip drops no more in this row)",
                value,
            )
        self.rebaselines.append(step)
        self.ema, self.last, self.in_a_row = value, value, 0
        self.seen += 1

    def _read(self, loss: torch.Tensor, step: int) -> list[tuple[int, float]]:
        """The (step, loss) pairs to judge now, in step order. On a CPU this step's (a host read
        costs nothing there). On a GPU the loss is copied to pinned memory without waiting, and
        every earlier copy whose event has completed is read; one still in flight `MAX_LATE` steps
        later is waited for, so no step goes unjudged."""
        copied = self._copy_async(loss)
        if copied is None:
            return [(step, float(loss))]
        self._inflight.append((step, *copied))
        return self._ready(MAX_LATE)

    def _ready(self, late: int) -> list[tuple[int, float]]:
        """Pop the in-flight losses from the oldest while their copy is done; wait for the oldest
        while more than `late` are in flight."""
        out = []
        while self._inflight:
            step, buf, event = self._inflight[0]
            if not event.query():
                if len(self._inflight) <= late:
                    break
                event.synchronize()  # waited for, never dropped
            self._inflight.popleft()
            out.append((step, float(buf)))
        return out

    @staticmethod
    def _copy_async(loss: torch.Tensor) -> tuple[torch.Tensor, Any] | None:
        """A CUDA loss's copy to pinned host memory and the event that marks it done (query():
        done yet?, synchronize(): wait); None for a loss the host reads for free (CPU)."""
        if loss.device.type != "cuda":
            return None
        buf = torch.empty((), dtype=loss.dtype, pin_memory=True)
        buf.copy_(loss.detach(), non_blocking=True)
        done = torch.cuda.Event()
        done.record()
        return buf, done

    def _spike(
        self, trainer: L.Trainer, pl_module: Any, step: int, value: float, sigma: float, can_drop: bool
    ) -> None:
        assert self.ema is not None
        now = trainer.global_step  # == step on a CPU; later on a GPU (the loss is read late)
        # one update to drop a step: two late spikes judged in one step drop it once
        drops = self.on_spike == "skip" and can_drop and not getattr(pl_module, "skip_update", False)
        record: dict[str, Any] = {
            "step": step,
            "telemetry_steps": [now, now + 1],
            "loss": value,
            "ema": self.ema,
            "sigma": sigma,
            "z": (value - self.ema) / sigma,
            "threshold": self.threshold,
            "on_spike": self.on_spike,
            "update_dropped": drops,
            "update_dropped_step": now if drops else None,
            **self._windows(trainer, step),
        }
        self.spikes.append(record)
        if drops:
            pl_module.skip_update = True  # consumed by this step's clipping: exactly one update dropped
            self.dropped += 1
        if trainer.is_global_zero:
            log.warning(
                "loss spike at step %d: %.4g vs EMA %.4g (%.1fσ > %.1fσ)%s",
                step,
                value,
                self.ema,
                record["z"],
                self.threshold,
                "; update dropped (callbacks.spikes.on_spike=skip)" if drops else "",
            )
        telemetry = self._telemetry(trainer)
        if telemetry is None or len(self.spikes) > self.max_records:
            if len(self.spikes) <= self.max_records:
                self._write(record)
            return
        already = (now + 1) % telemetry.every == 0 or now in telemetry.forced
        telemetry.force(now)
        telemetry.force(now + 1)
        if not already and not any(hasattr(b, "unshard") for b in pl_module.model.blocks):
            self._forward_again(telemetry, pl_module)
        self._pending.append(record)

    def _forward_again(self, telemetry: Any, pl_module: Any) -> None:
        """Step N's forward-side telemetry: the same micro-batch, weights and RNG draws once more
        (with gradients on, as in training, so compiled blocks reuse their graph; nothing is kept)."""
        kept = (pl_module.last_ce, pl_module.last_z)
        devices = [pl_module.device] if pl_module.device.type == "cuda" else []
        with torch.random.fork_rng(devices=devices):
            telemetry.arm(pl_module)
            try:
                pl_module._loss(self._batch)
            finally:
                telemetry.disarm(pl_module)
        pl_module.last_ce, pl_module.last_z = kept

    @staticmethod
    def _windows(trainer: L.Trainer, step: int) -> dict[str, Any]:
        """The global batch of `step` as window indices of the train split, in stream order."""
        loader = getattr(trainer, "train_dataloader", None)
        sampler = getattr(loader, "batch_sampler", None)
        dataset = getattr(loader, "dataset", None)
        packed = getattr(dataset, "packed", None)
        if not hasattr(sampler, "window_at") or packed is None:
            return {"windows": None, "data": None}
        reader = copy.copy(sampler)  # its own permutation cache: the live iterator keeps its own
        size = sampler.global_batch * trainer.accumulate_grad_batches
        start = step * size
        data: dict[str, Any] = {
            "dtype": str(packed.dtype),
            "block_size": dataset.block_size,
            "layout": "position stream_start+i is row i; under W ranks, rank (i % W) read it",
        }
        segments = getattr(packed, "splits", {}).get(dataset.split)
        if segments is None:  # one flat token file: the one-liner above reads it back
            data["token_file"] = str(packed.path(dataset.split))
        else:  # data.source=tokens: the split is these shard segments, end to end
            data["segments"] = [
                {"shard": str(g.shard.path), "offset_bytes": g.shard.offset, "start": g.start, "stop": g.stop}
                for g in segments
            ]
        return {
            "windows": [reader.window_at(g) for g in range(start, start + size)],
            "stream_start": start,
            "data": data,
        }

    def on_train_batch_end(
        self, trainer: L.Trainer, pl_module: Any, outputs: Any, batch: Any, i: int
    ) -> None:
        done = trainer.global_step - 1  # the step just taken
        for record in [r for r in self._pending if r["telemetry_steps"][-1] <= done]:
            self._complete(trainer, record)

    def on_train_end(self, trainer: L.Trainer, pl_module: Any) -> None:
        for step, value in self._ready(0):  # GPU: the last steps' losses, waited for
            self._judge(trainer, pl_module, step, value, can_drop=False)
        for record in list(self._pending):
            self._complete(trainer, record)

    def _complete(self, trainer: L.Trainer, record: dict[str, Any]) -> None:
        self._pending.remove(record)
        telemetry = self._telemetry(trainer)
        history = dict(telemetry.history) if telemetry is not None else {}
        steps = record["telemetry_steps"]
        record["telemetry"] = {str(s): history[s] for s in steps if s in history}
        record["blocks"] = culprits.blocks(telemetry, steps[0])
        record["routers"] = culprits.routers(telemetry, steps[0])
        self._write(record)

    def _write(self, record: dict[str, Any]) -> None:
        if self.dir is None or not _rank_zero():
            return
        from gptlab.training.callbacks.summary import write_json_atomic

        write_json_atomic(self.dir / f"step_{record['step']}.json", record)

    def summary_fields(self) -> dict[str, Any]:
        """What metrics.json records (the report marks `spike_steps` on the loss curve)."""
        first = self.spikes[0] if self.spikes else None
        return {
            "n_spikes": len(self.spikes),
            "spike_steps": [r["step"] for r in self.spikes],
            "first_spike_step": first["step"] if first else None,
            "first_spike_blocks": [b["block"] for b in first.get("blocks", [])] if first else [],
            "first_spike_routers": [r["block"] for r in first.get("routers", [])] if first else [],
            "spike_updates_dropped": self.dropped,
            "spike_rebaseline_steps": list(self.rebaselines),
        }


def _rank_zero() -> bool:
    from lightning.fabric.utilities.rank_zero import rank_zero_only

    return getattr(rank_zero_only, "rank", 0) == 0
