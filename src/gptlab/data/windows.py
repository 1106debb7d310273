"""Fixed-size token windows of one split, and how a batch of them becomes tensors."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset

from gptlab.data.packing import PackedData
from gptlab.data.samplers import PAD
from gptlab.data.shards import ShardedData, ShardedTokens


class TokenWindows(Dataset):
    """Window k = tokens[k·block_size : k·block_size + block_size + 1] of one split's token file."""

    def __init__(self, packed: PackedData | ShardedData, split: str, block_size: int) -> None:
        self.packed = packed
        self.split = split
        self.block_size = block_size
        n_tokens = int(packed.meta["n_tokens"][split])
        if n_tokens < block_size + 1:
            raise ValueError(
                f"data: the {split} split has {n_tokens} tokens, fewer than block_size+1="
                f"{block_size + 1}; use a larger corpus (data.path / data.max_bytes), a smaller "
                "block_size, or a different data.val_fraction"
            )
        self.n_tokens = n_tokens
        self._tokens: np.memmap | ShardedTokens | None = None
        self._pid: int | None = None

    def __len__(self) -> int:
        return (self.n_tokens - 1) // self.block_size

    def tokens(self) -> np.memmap | ShardedTokens:
        """The memmap, opened lazily once per process (DataLoader workers each open their own)."""
        if self._tokens is None or self._pid != os.getpid():
            self._tokens = self.packed.tokens(self.split)
            self._pid = os.getpid()
        return self._tokens

    def __getitem__(self, k: int) -> np.ndarray:
        if not 0 <= k < len(self):
            raise IndexError(f"window {k} out of range for {len(self)} {self.split} windows")
        start = k * self.block_size
        return np.asarray(self.tokens()[start : start + self.block_size + 1])

    def __getitems__(self, ks: list[int]) -> list[np.ndarray]:
        return [self[k] for k in ks]

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_tokens"] = None  # never pickle a memmap into worker processes
        return state


def collate_windows(windows: list[np.ndarray]) -> torch.Tensor:
    """Stack windows into a LongTensor (B, block_size+1); the model splits x=[:, :-1], y=[:, 1:]."""
    return torch.from_numpy(np.stack(windows).astype(np.int64))


class WeightedWindows(Dataset):
    """(window, weight) pairs of a split: weight 1 for a real window, 0 for PAD (window 0 again)."""

    def __init__(self, windows: TokenWindows) -> None:
        self.windows = windows

    def __len__(self) -> int:
        return len(self.windows)

    def __getitem__(self, k: int) -> tuple[np.ndarray, float]:
        return (self.windows[0], 0.0) if k == PAD else (self.windows[k], 1.0)


def collate_weighted(items: list[tuple[np.ndarray, float]]) -> tuple[torch.Tensor, torch.Tensor]:
    """(LongTensor (B, block_size+1), float weights (B,)): the val batch the module reduces."""
    windows, weights = zip(*items, strict=True)
    return collate_windows(list(windows)), torch.tensor(weights, dtype=torch.float32)
