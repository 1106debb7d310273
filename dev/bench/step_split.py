"""Where a training step's CPU time goes, against nanoGPT's: four loops of one shape in one process,
one thread, interleaved rounds (CPU ms a step: time.process_time).

usage: python -m dev.bench.step_split [--nanogpt /tmp/nanogpt] [--rounds 5] [--steps 30] [--warmup 3]
                                      [--shape small|tiny] [--set k=v ...]
- `nanogpt`: nanoGPT's model.py (imported from the checkout `--nanogpt` names: gptlab ships none of its
  code) in a plain loop: forward with targets, backward, clip_grad_norm_, its configure_optimizers
  (on a CPU torch's for-each AdamW: it fuses on CUDA only), zero_grad(set_to_none); and
  `nanogpt_fused`, the same parameter groups in torch's fused AdamW, which gptlab uses on a CPU;
- `plain`: gptlab's GPT in the same loop, with gptlab's optimizer (training/optim.py) and LR schedule;
- `lightning`: that GPT and optimizer under a bare Lightning Trainer (gradient_clip_val, no callbacks,
  logger, checkpoints or bar): Lightning's own loop;
- `fit`: gptlab's fit step (gptlab.bench.lightning_loop: the app's Trainer, default callbacks, CSV
  logger, telemetry every trainer.log_every_n_steps; no validation inside the window) on the run's
  own TokenDataModule batches (the other loops reuse pre-drawn ones).
The shape is dev.bench.short_run's (nanoGPT's shakespeare_char config at `small` size) with nanoGPT's
block (`model.norm=layernorm model.ffn=gelu model.pos_emb=learned`, set here) unless --set changes it.
Differences of the medians: plain − nanogpt_fused is the model's own, lightning − plain Lightning's
loop, fit − lightning gptlab's per-step framework (callbacks, logging, the guard, the data loader).
See docs/performance.md, "Short runs".
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import lightning as L
import torch

from dev.bench.corpus import local_text
from dev.bench.short_run import shape_overrides

NANOGPT_BLOCK = ["model.norm=layernorm", "model.ffn=gelu", "model.pos_emb=learned"]
Step = Callable[[], None]


class CPUStamps(L.Callback):
    """The process's CPU clock at the end of every training batch."""

    def __init__(self) -> None:
        self.stamps: list[float] = []

    def on_train_batch_end(
        self, trainer: L.Trainer, pl_module: Any, outputs: Any, batch: Any, i: int
    ) -> None:
        self.stamps.append(time.process_time())


def per_step(stamps: list[float], warmup: int) -> float:
    """Mean CPU seconds a step after the warm-up steps (log steps included, as a run pays them)."""
    return (stamps[-1] - stamps[warmup - 1]) / (len(stamps) - warmup)


class Bench:
    """The composed config, the model config and the batches every loop shares."""

    def __init__(self, overrides: list[str], nanogpt: Path | None) -> None:
        from gptlab.bench.lightning_loop import quiet
        from gptlab.bench.options import compose
        from gptlab.data.datamodule import TokenDataModule
        from gptlab.training.app import model_config

        self.cfg = compose(overrides)
        dm = TokenDataModule(self.cfg.data, block_size=self.cfg.model.block_size, seed=self.cfg.seed)
        with quiet():
            dm.prepare()
        self.mcfg = model_config(self.cfg, dm.vocab_size, dm.tokenizer)
        shape = (self.cfg.data.batch_size, self.mcfg.block_size + 1)
        g = torch.Generator().manual_seed(0)
        self.batches = [torch.randint(0, self.mcfg.vocab_size, shape, generator=g) for _ in range(32)]
        self.nanogpt = None
        if nanogpt is not None:
            spec = importlib.util.spec_from_file_location("nanogpt_model", nanogpt / "model.py")
            assert spec is not None and spec.loader is not None
            self.nanogpt = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(self.nanogpt)

    def loop(self, model: torch.nn.Module, opt: torch.optim.Optimizer, loss: Callable, lr: Callable) -> Step:
        """forward, backward, clip_grad_norm_, step, zero_grad: the plain loop both models run."""
        model.train()
        pairs = [(b[:, :-1].contiguous(), b[:, 1:].contiguous()) for b in self.batches]
        k = 0

        def step() -> None:
            nonlocal k
            x, y = pairs[k % len(pairs)]
            loss(model, x, y).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), self.cfg.optim.grad_clip)
            opt.step()
            opt.zero_grad(set_to_none=True)
            lr(k)
            k += 1

        return step

    def nanogpt_step(self, fused: bool) -> Step:
        m, o, c = self.mcfg, self.cfg.optim, self.nanogpt
        torch.manual_seed(self.cfg.seed)
        with contextlib.redirect_stdout(io.StringIO()):  # it prints its parameter counts
            model = c.GPT(  # type: ignore[union-attr]
                c.GPTConfig(  # type: ignore[union-attr]
                    block_size=m.block_size, vocab_size=m.vocab_size, n_layer=m.n_layer, n_head=m.n_head,
                    n_embd=m.n_embd, dropout=m.dropout, bias=m.bias,
                )
            )  # fmt: skip
            opt = model.configure_optimizers(o.weight_decay, o.lr, (o.beta1, o.beta2), "cpu")
        if fused:
            opt = torch.optim.AdamW(opt.param_groups, lr=o.lr, betas=(o.beta1, o.beta2), fused=True)
        factor = self.lr_factor()

        def set_lr(k: int) -> None:  # as nanoGPT's train.py sets it, every step
            for group in opt.param_groups:
                group["lr"] = o.lr * factor(k + 1)

        return self.loop(model, opt, lambda mod, x, y: mod(x, y)[1], set_lr)

    def lr_factor(self) -> Callable[[int], float]:
        from gptlab.training.optim import lr_factor

        return lr_factor(self.cfg.optim, 100_000)

    def gptlab_parts(self) -> tuple[torch.nn.Module, torch.optim.Optimizer, Any]:
        from gptlab.model import GPT
        from gptlab.training.optim import build_optimizer

        torch.manual_seed(self.cfg.seed)
        model = GPT(self.mcfg)
        opt = build_optimizer(model, self.cfg.optim, "cpu")
        return model, opt, torch.optim.lr_scheduler.LambdaLR(opt, self.lr_factor())

    def plain_step(self) -> Step:
        from gptlab.training.loss import token_losses

        model, opt, schedule = self.gptlab_parts()
        return self.loop(
            model, opt, lambda mod, x, y: token_losses(mod(x), y, 0.0)[0], lambda k: schedule.step()
        )

    def lightning(self, steps: int, warmup: int) -> float:
        from gptlab.bench.lightning_loop import quiet
        from gptlab.training.loss import token_losses

        model, opt, schedule = self.gptlab_parts()

        class Bare(L.LightningModule):
            def __init__(self) -> None:
                super().__init__()
                self.model = model

            def training_step(self, batch: torch.Tensor, i: int) -> torch.Tensor:
                return token_losses(self.model(batch[:, :-1]), batch[:, 1:], 0.0)[0]

            def configure_optimizers(self) -> Any:
                return {"optimizer": opt, "lr_scheduler": {"scheduler": schedule, "interval": "step"}}

        clock = CPUStamps()
        with tempfile.TemporaryDirectory() as tmp, quiet():
            trainer = L.Trainer(
                accelerator="cpu", devices=1, max_steps=warmup + steps, logger=False, callbacks=[clock],
                enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                num_sanity_val_steps=0, limit_val_batches=0, gradient_clip_val=self.cfg.optim.grad_clip,
                default_root_dir=tmp,
            )  # fmt: skip
            trainer.fit(Bare(), train_dataloaders=torch.utils.data.DataLoader(self.batches, batch_size=None))
        return per_step(clock.stamps, warmup)

    def fit(self, steps: int, warmup: int) -> float:
        from gptlab.bench.lightning_loop import lightning_run, quiet

        clock = CPUStamps()
        every = self.cfg.trainer.log_every_n_steps
        with tempfile.TemporaryDirectory() as tmp, quiet():
            lightning_run(
                self.cfg,
                self.mcfg,
                torch.device("cpu"),
                "cpu",
                every,
                warmup,
                steps,
                Path(tmp),
                extra=[clock],
            )
        return per_step(clock.stamps, warmup)


def timed(step: Step, steps: int, warmup: int) -> float:
    for _ in range(warmup):
        step()
    t0 = time.process_time()
    for _ in range(steps):
        step()
    return (time.process_time() - t0) / steps


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--nanogpt", help="a karpathy/nanoGPT checkout (its model.py); without it, gptlab's loops only"
    )
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--steps", type=int, default=30, help="timed steps a loop a round")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--shape", default="small", choices=["small", "tiny"])
    p.add_argument("--set", action="append", default=[], help="more train.py overrides")
    args = p.parse_args(argv)
    nano = Path(args.nanogpt) if args.nanogpt else None
    if nano is not None and not (nano / "model.py").is_file():
        print(f"error: --nanogpt={args.nanogpt!r} holds no model.py; give a karpathy/nanoGPT checkout")
        return 2
    torch.set_num_threads(1)
    work = Path(tempfile.gettempdir()) / "gptlab_step_split"
    text = local_text(work / "corpus.txt")
    overrides = [
        *shape_overrides(args.shape), f"data.path={text}", f"data.cache_dir={work / 'cache'}", *NANOGPT_BLOCK,
        *args.set,
    ]  # fmt: skip
    bench = Bench(overrides, nano)
    loops: dict[str, Callable[[], float]] = {}
    if nano is not None:
        loops["nanogpt"] = lambda: timed(bench.nanogpt_step(False), args.steps, args.warmup)
        loops["nanogpt_fused"] = lambda: timed(bench.nanogpt_step(True), args.steps, args.warmup)
    loops["plain"] = lambda: timed(bench.plain_step(), args.steps, args.warmup)
    loops["lightning"] = lambda: bench.lightning(args.steps, args.warmup)
    loops["fit"] = lambda: bench.fit(args.steps, args.warmup)
    ms: dict[str, list[float]] = {k: [] for k in loops}
    for r in range(args.rounds):
        for name in list(loops) if r % 2 == 0 else list(loops)[::-1]:
            ms[name].append(loops[name]() * 1e3)
        print(f"round {r + 1}: " + ", ".join(f"{k} {v[-1]:.2f}" for k, v in ms.items()), flush=True)
    med = {k: statistics.median(v) for k, v in ms.items()}
    m = bench.mcfg
    print(
        f"CPU ms a step, median of {args.rounds} rounds ({args.steps} steps each), one thread; "
        f"L={m.n_layer} H={m.n_head} d={m.n_embd} T={m.block_size} V={m.vocab_size} "
        f"batch {bench.cfg.data.batch_size} dropout {m.dropout}"
    )
    for k, v in med.items():
        print(f"| {k} | {v:.2f} |")
    parts = [
        ("model (plain − nanogpt_fused)", "plain", "nanogpt_fused"),
        ("AdamW for-each − fused (nanogpt − nanogpt_fused)", "nanogpt", "nanogpt_fused"),
        ("Lightning's loop (lightning − plain)", "lightning", "plain"),
        ("gptlab's framework (fit − lightning)", "fit", "lightning"),
        ("fit − nanogpt", "fit", "nanogpt"),
    ]
    for label, a, b in parts:
        if a in med and b in med:
            print(f"{label}: {med[a] - med[b]:+.2f} ms ({med[a] / med[b] - 1:+.1%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
