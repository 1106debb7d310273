"""torch's memory trackers as the planner reads them: only the device's peak, not every module's.

`MemTracker.__torch_dispatch__` calls `_update_peak_stats` after every op, and that walks every
module the tracker has seen (a weak-keyed dict: each key re-checked through the module's
`__getattr__`) to keep each active module's own peak. The planner reads only the device's peak
snapshot (`get_tracker_snapshot("peak")`), and at the sizing table's shapes the walk was half of
a fake step's CPU time. These subclasses keep the device-peak half of that method, line for line
as torch 2.13 writes it, and drop the per-module half: the device's peak and its snapshot are the
same bytes (tests/planning/test_trackers.py compares them with torch's own trackers).
"""

from __future__ import annotations

from copy import deepcopy
from typing import Any

import torch
from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker
from torch.distributed._tools.mem_tracker import MemTracker

TOTAL = "Total"  # mem_tracker's _TOTAL_KEY: a device snapshot's sum


def _device_peak(tracker: MemTracker) -> None:
    """The device half of MemTracker._update_peak_stats: a new peak keeps a copy of the snapshot
    (strictly greater, so a tie keeps the first moment that reached it, as torch's does)."""
    for dev, dev_snap in tracker._curr_mem_snap.items():
        if tracker._peak_mem.get(dev, 0) < dev_snap[TOTAL]:
            tracker._peak_mem[dev] = dev_snap[TOTAL]
            tracker._peak_mem_snap[dev] = deepcopy(dev_snap)


class PeakMemTracker(MemTracker):
    """MemTracker keeping the device's peak only (module peaks are not kept)."""

    def _update_peak_stats(self, peak_state: Any) -> None:
        _device_peak(self)


class PeakFSDPMemTracker(FSDPMemTracker):
    """FSDPMemTracker keeping the device's peak only (module peaks are not kept)."""

    def _update_peak_stats(self, peak_state: Any) -> None:
        _device_peak(self)


def tracker_for(
    model: torch.nn.Module, opt: torch.optim.Optimizer, batch: torch.Tensor, fsdp: bool
) -> MemTracker:
    """The step's tracker: FSDPMemTracker's categories under FSDP2 (all-gather and reduce-scatter
    buffers, sharded and unsharded parameters), MemTracker's otherwise; the model, the optimizer
    and the batch registered as torch's docs do it."""
    if fsdp:
        tracker: MemTracker = PeakFSDPMemTracker(model, opt)
        tracker.track_inputs((batch,))
        return tracker
    tracker = PeakMemTracker()
    tracker.track_external(model, opt, batch)
    return tracker
