"""TokenDataModule: windows of the packed token files, in a resumable, DDP-exact order.

The training order is one global stream of window indices: pass p is `randperm(n_windows)` seeded
with `seed + p`, stream position g holds window `perm_{g // n}[g % n]`. Rank r of W takes the
positions with g % W == r, so the ranks of one micro-step together read exactly what a single
process with batch b·W would. Iteration starts at `global_step · accumulate_grad_batches · b · W`,
read from the (restored) trainer when the loader is iterated, so a resumed run continues the stream
where the checkpoint left it. The Trainer must run with `use_distributed_sampler=False`.

Validation reads a fixed subset of `data.val_windows` windows spread over the whole val split
(`val_subset`: one seeded draw per equal stratum), the same whatever the world size, batch size or run
seed, so every run and evaluate.py score the same windows. Rank r of W reads subset positions
r, r+W, …, padded with weight-0 windows to ceil(N/W) each, so all ranks run the same number of
val batches (FSDP2's forward is a collective) and the weighted sums over ranks count each window once;
and padded to batches of one size (samplers.even_batches: no ragged last batch for compile to see).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

import lightning as L
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from gptlab.data.config import DataConfig
from gptlab.data.packing import PackedData, pack
from gptlab.data.resolve import resolve, resolve_shards
from gptlab.data.samplers import DEFAULT_VAL_WINDOWS, ShardedSubsetSampler, StreamBatchSampler, val_subset
from gptlab.data.shards import ShardedData, read_shards
from gptlab.data.tokenizers import Tokenizer
from gptlab.data.windows import TokenWindows, WeightedWindows, collate_weighted, collate_windows

__all__ = ["StreamBatchSampler", "TokenDataModule", "TokenWindows", "collate_windows"]

log = logging.getLogger(__name__)


class ResumableDataLoader(DataLoader):
    """A DataLoader whose position is trainer.global_step; the state hooks tell Lightning so."""

    def state_dict(self) -> dict[str, Any]:
        """Nothing to save: the sampler derives its position from the restored global step."""
        return {"position": "trainer.global_step"}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Nothing to restore (see state_dict)."""


class TokenDataModule(L.LightningDataModule):
    """Packed-token windows for training and validation, built from a DataConfig."""

    def __init__(self, cfg: DataConfig, block_size: int, seed: int) -> None:
        super().__init__()
        if block_size < 1:
            raise ValueError(f"block_size={block_size!r} must be >= 1")
        if cfg.batch_size < 1:
            raise ValueError(f"data.batch_size={cfg.batch_size!r} must be >= 1")
        if cfg.num_workers < 0:
            raise ValueError(f"data.num_workers={cfg.num_workers!r} must be >= 0")
        if cfg.val_windows is not None and cfg.val_windows < 0:
            raise ValueError(
                f"data.val_windows={cfg.val_windows!r} must be >= 0 "
                "(the number of val windows to score; 0: every window of the val split)"
            )
        self.cfg = cfg
        self.block_size = block_size
        self.seed = seed
        self.packed: PackedData | ShardedData | None = None
        self.tokenizer: Tokenizer | None = None
        self.vocab_size: int | None = None
        self.bytes_per_token: float | None = None
        self.meta: dict[str, Any] | None = None
        self._datasets: dict[str, TokenWindows] = {}

    def prepare(self) -> PackedData | ShardedData:
        """Pack (or find cached) tokens, or open pre-tokenized shards in place; expose tokenizer,
        vocab_size, bytes_per_token, meta."""
        if self.packed is None:
            if self.cfg.source == "tokens":  # read in place
                self.packed = read_shards(resolve_shards(self.cfg))
            else:  # the config resolved once, then sources -> tokenizing -> packing into the cache
                self.packed = pack(resolve(self.cfg))
            self.tokenizer = self.packed.tokenizer
            self.meta = self.packed.meta
            self.vocab_size = int(self.meta["vocab_size"])
            self.bytes_per_token = float(self.meta["bytes_per_token"])
        return self.packed

    def prepare_data(self) -> None:
        """Lightning hook (once per node): tokenize before the ranks read."""
        self.prepare()

    def setup(self, stage: str | None = None) -> None:
        """Lightning hook (every rank): open the stage's splits, failing early if too short."""
        self.prepare()
        if stage in (None, "fit"):
            self.dataset("train")
        if stage in (None, "fit", "validate"):
            self.dataset("val")  # data.val_windows is checked by val_dataloader, before any batch

    def dataset(self, split: str) -> TokenWindows:
        """The windows of a split ("train" or "val")."""
        if split not in self._datasets:
            self._datasets[split] = TokenWindows(self.prepare(), split, self.block_size)
        return self._datasets[split]

    def _dist(self) -> tuple[int, int]:
        trainer = self.trainer
        if trainer is None:
            return 0, 1
        return int(trainer.global_rank), int(trainer.world_size)

    def _check_sampler_setting(self) -> None:
        connector = getattr(self.trainer, "_accelerator_connector", None)
        if connector is not None and connector.use_distributed_sampler and connector.is_distributed:
            raise ValueError(
                "trainer.use_distributed_sampler=True would replace TokenDataModule's sharded "
                "sampler; accepted: use_distributed_sampler=False (the data module shards by rank)"
            )

    def _epoch_batches(self, n_windows: int, global_batch: int, accumulate: int) -> int:
        trainer = self.trainer
        if trainer is not None and trainer.max_steps is not None and trainer.max_steps > 0:
            return trainer.max_steps * accumulate  # the whole run is one epoch
        per_pass = (n_windows // global_batch) // accumulate * accumulate
        if per_pass < 1:
            raise ValueError(
                f"data: the train split has {n_windows} windows, fewer than one optimizer step "
                "needs (batch_size·world_size·accumulate_grad_batches = "
                f"{global_batch * accumulate})"
            )
        return per_pass

    def train_sampler(self) -> StreamBatchSampler:
        """This rank's sampler, positioned from the trainer's global step (0 without a trainer)."""
        train = self.dataset("train")
        rank, world = self._dist()
        trainer = self.trainer
        accumulate = int(trainer.accumulate_grad_batches) if trainer is not None else 1
        global_batch = self.cfg.batch_size * world

        def start() -> int:
            return int(trainer.global_step) * accumulate * global_batch if trainer else 0

        return StreamBatchSampler(
            n_windows=len(train),
            batch_size=self.cfg.batch_size,
            seed=self.seed,
            epoch_batches=self._epoch_batches(len(train), global_batch, accumulate),
            start=start,
            rank=rank,
            world_size=world,
        )

    def _loader(self, dataset: Dataset, collate: Callable = collate_windows, **kwargs: Any) -> DataLoader:
        workers = self.cfg.num_workers
        return ResumableDataLoader(
            dataset,
            collate_fn=collate,
            num_workers=workers,
            persistent_workers=workers > 0,
            pin_memory=torch.cuda.is_available(),
            **kwargs,
        )

    def train_dataloader(self) -> DataLoader:
        """Training batches (B, block_size+1) following the global stream from the current step."""
        self._check_sampler_setting()
        return self._loader(self.dataset("train"), batch_sampler=self.train_sampler())

    def subset(self, split: str = "val") -> list[int]:
        """The windows validation scores: data.val_windows of them, spread over the whole split."""
        n = len(self.dataset(split))
        count = self.cfg.val_windows
        if count is None:  # the default: a fixed size, capped by small splits
            count = min(DEFAULT_VAL_WINDOWS, n)
        if count > n:
            raise ValueError(
                f"data.val_windows={count} but the {split} split has only {n} windows of "
                f"block_size={self.block_size} tokens; accepted: 0 (all {n}) to {n}"
            )
        return val_subset(n, count)

    def eval_dataloader(self, split: str = "val") -> DataLoader:
        """(tokens, weight) batches of this rank's share of the split's subset; every rank gets the
        same number of batches, all of one size, padding weighted 0."""
        rank, world = self._dist()
        sampler = ShardedSubsetSampler(self.subset(split), rank, world, self.cfg.batch_size)
        return self._loader(
            WeightedWindows(self.dataset(split)),
            batch_size=sampler.batch_size,  # <= data.batch_size, every batch one size (even_batches)
            sampler=sampler,
            collate=collate_weighted,
        )

    def val_dataloader(self) -> DataLoader:
        """Validation batches: the val subset, each window once over all ranks (see eval_dataloader)."""
        return self.eval_dataloader("val")

    def decode(self, ids: Iterable[int] | torch.Tensor) -> str:
        """Text of token ids (generation samples)."""
        self.prepare()
        assert self.tokenizer is not None
        if isinstance(ids, torch.Tensor):
            ids = ids.flatten().tolist()
        return self.tokenizer.decode(ids)

    def sample_prompt(self, max_tokens: int = 16) -> list[int]:
        """The first tokens of a validation document: the end-of-run sample (and generate.py without a
        prompt) then continues text like the data, whatever the data is.

        The val split starts at a document start when packed by documents; otherwise (split by
        tokens, or shards cut mid-document) the document after the first end-of-text token is used,
        and the split's start when none is found in the first 64 Ki tokens.
        """
        packed = self.prepare()
        tokens = packed.tokens("val")
        head = np.asarray(tokens[: 1 << 16])
        start = 0
        eos = packed.meta.get("eos_id")
        if packed.meta.get("split_mode") != "documents" and eos is not None:
            hits = np.flatnonzero(head[:-1] == eos)
            start = int(hits[0]) + 1 if hits.size else 0
        prompt = head[start : start + max_tokens]
        if eos is not None and (cut := np.flatnonzero(prompt == eos)).size:
            prompt = prompt[: max(1, int(cut[0]))]  # a document shorter than the prompt: stop at its end
        return [int(t) for t in prompt]

    def state_dict(self) -> dict[str, Any]:
        """Saved in checkpoints so a resumed run can tell whether its data changed."""
        meta = self.prepare().meta
        return {
            "fingerprint": meta["fingerprint"],
            "tokenizer": meta["tokenizer"],
            "vocab_size": meta["vocab_size"],
            "n_tokens": meta["n_tokens"],
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Warn when the checkpoint was trained on other data: the resumed stream then differs."""
        saved = state_dict.get("fingerprint")
        current = self.prepare().meta["fingerprint"]
        if saved != current:
            log.warning(
                "checkpoint data fingerprint %s differs from the current data %s (%s): "
                "the resumed run reads a different token stream",
                saved,
                current,
                self.prepare().directory,
            )
