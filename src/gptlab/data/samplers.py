"""Which windows each rank reads, and in what order: the seeded global training stream and the
fixed validation subset (see datamodule's docstring for the contract both keep)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import torch
from torch.utils.data import Sampler


class StreamBatchSampler(Sampler[list[int]]):
    """This rank's micro-batches of the seeded global window stream, from a resumable position."""

    def __init__(
        self,
        n_windows: int,
        batch_size: int,
        seed: int,
        epoch_batches: int,
        start: int | Callable[[], int] = 0,
        rank: int = 0,
        world_size: int = 1,
    ) -> None:
        if not 0 <= rank < world_size:
            raise ValueError(f"rank={rank} must be in 0..world_size-1 (world_size={world_size})")
        if n_windows < 1 or batch_size < 1 or epoch_batches < 1:
            raise ValueError(
                f"n_windows={n_windows}, batch_size={batch_size} and "
                f"epoch_batches={epoch_batches} must all be >= 1"
            )
        self.n_windows = n_windows
        self.batch_size = batch_size
        self.seed = seed
        self.epoch_batches = epoch_batches
        self.start = start
        self.rank = rank
        self.world_size = world_size
        self._perm_pass = -1
        self._perm = torch.empty(0, dtype=torch.long)

    @property
    def global_batch(self) -> int:
        """Samples per micro-step over all ranks."""
        return self.batch_size * self.world_size

    def start_position(self) -> int:
        """Stream position where iteration begins (read now: the trainer may have been restored)."""
        start = self.start() if callable(self.start) else self.start
        if start < 0 or start % self.global_batch:
            raise ValueError(f"start={start} must be a non-negative multiple of {self.global_batch}")
        return start

    def window_at(self, g: int) -> int:
        """Window index at global stream position g."""
        p, i = divmod(g, self.n_windows)
        if p != self._perm_pass:
            gen = torch.Generator().manual_seed(self.seed + p)
            self._perm = torch.randperm(self.n_windows, generator=gen)
            self._perm_pass = p
        return int(self._perm[i])

    def remaining(self, start: int) -> int:
        """Micro-batches left in the epoch that contains stream position start."""
        return self.epoch_batches - (start // self.global_batch) % self.epoch_batches

    def __len__(self) -> int:
        # The whole epoch, not what is left: Lightning restores its in-epoch batch counter on resume
        # and ends the epoch when that counter reaches len(dataloader).
        return self.epoch_batches

    def __iter__(self) -> Iterator[list[int]]:
        start = self.start_position()
        for j in range(self.remaining(start)):
            first = start + j * self.global_batch
            yield [
                self.window_at(g)
                for g in range(first + self.rank, first + self.global_batch, self.world_size)
            ]


DEFAULT_VAL_WINDOWS = 128  # data.val_windows=null: this many, or the whole split if it is smaller
VAL_SUBSET_SEED = 0  # fixed, not the run's seed: runs of every seed are scored on the same windows
PAD = -1  # a sampler index that reads a dummy window of weight 0


def val_subset(n_windows: int, count: int, seed: int = VAL_SUBSET_SEED) -> list[int]:
    """`count` window indices spread over all n_windows, ascending (0: every window).

    Stratified: stratum i is [⌊i·n/count⌋, ⌊(i+1)·n/count⌋), one uniform draw in each from a
    generator seeded with `seed`, so the subset covers the split evenly and depends on nothing else.
    """
    if count == 0 or count == n_windows:
        return list(range(n_windows))
    if not 0 < count <= n_windows:
        raise ValueError(f"count={count} must be in 0..n_windows={n_windows}")
    edges = torch.arange(count + 1, dtype=torch.int64) * n_windows // count
    size = edges[1:] - edges[:-1]  # >= 1 each, since count <= n_windows
    u = torch.rand(count, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    offset = torch.minimum((u * size).long(), size - 1)
    return (edges[:-1] + offset).tolist()


def even_batches(count: int, batch_size: int) -> tuple[int, int]:
    """(batches, size): `count` windows in ceil(count/batch_size) batches all of one size <= batch_size.

    Why one size: under `compile` a ragged last batch is a new input shape, and Dynamo compiles the
    blocks again for it (a dynamic graph: minutes at scale on a GPU). Validation has its own graph
    anyway (no grad), so its size need not be training's, only the same for every batch; the padding
    this costs is fewer windows than there are batches.
    """
    batches = max(1, -(-count // batch_size))
    return batches, -(-count // batches)


class ShardedSubsetSampler(Sampler[int]):
    """Rank r's share of the val subset: positions r, r+W, …, padded with PAD to ceil(N/W) entries,
    and further to `batches · batch_size` (even_batches: every batch of one size, read it there)."""

    def __init__(self, subset: list[int], rank: int = 0, world_size: int = 1, batch_size: int = 1) -> None:
        if not 0 <= rank < world_size:
            raise ValueError(f"rank={rank} must be in 0..world_size-1 (world_size={world_size})")
        per_rank = -(-len(subset) // world_size)
        batches, self.batch_size = even_batches(per_rank, batch_size)
        own = list(subset[rank::world_size])
        self.indices = own + [PAD] * (batches * self.batch_size - len(own))

    def __len__(self) -> int:
        return len(self.indices)

    def __iter__(self) -> Iterator[int]:
        return iter(self.indices)
