"""A distributed checkpoint written off the training thread (DCP's async_save), swapped in only
once every rank's write succeeded.

A save stages a copy of the rank's shards in host memory, hands the write to a DCP thread and
returns; the training goes on. `finish` (the next save's start, and the strategy's teardown) waits
for the write, the ranks agree it succeeded everywhere, rank zero swaps the directory in, and all
wait for it: a failed write is never swapped in, so the previous checkpoint stays the valid one.

What differs between the torch releases gptlab runs on (2.11 on the lent GPU image, 2.13 here):
`async_save` returns a `Future` or, with an asynchronous stager, an `AsyncSaveResponse` whose
`upload_completion` is the write; both are accepted. The stage is the storage writer's own
(in torch 2.13 `FileSystemWriter` is a `BlockingAsyncStager`: a fresh CPU copy of every tensor, CPU
ones included), not `async_save`'s default, which some releases made with `.to("cpu")`: on a CPU
run that is the live tensor, and the next optimizer steps would race the write.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

log = logging.getLogger(__name__)
META = "meta.pt"  # Lightning's name for the rest of the checkpoint (loops, callbacks) beside the shards


class AsyncSaveError(RuntimeError):
    """An asynchronous checkpoint write failed on some rank; the previous checkpoint was kept."""


@dataclass
class PendingSave:
    """One write in flight: where it writes, and where it goes once every rank succeeded."""

    future: Future
    tmp: Path
    path: Path

    def wait(self) -> BaseException | None:
        """This rank's outcome: None, or what the write raised."""
        try:
            self.future.result()
        except BaseException as err:  # the write's own failure is the answer, not a crash here
            return err
        return None


def upload_future(response: Any) -> Future:
    """The write's Future from what `async_save` returned (a Future, or an AsyncSaveResponse)."""
    return getattr(response, "upload_completion", response)


def save_group() -> Any:
    """A gloo group of all ranks for the background write's collectives (plan gather, metadata):
    two threads issuing collectives on one group may interleave differently on each rank. Every
    rank must call this at the same point (new_group is itself collective)."""
    return dist.new_group(backend="gloo")


def start(state: dict[str, Any], meta: dict[str, Any], tmp: Path, group: Any, zero: bool) -> Future:
    """Stage `state` (shards) and start its write into `tmp`; rank zero writes `meta` there now."""
    from torch.distributed.checkpoint import FileSystemWriter, async_save

    tmp.mkdir(parents=True, exist_ok=True)
    writer = FileSystemWriter(tmp)  # stages a copy (BlockingAsyncStager) before async_save returns
    response = async_save(state, checkpoint_id=tmp, storage_writer=writer, process_group=group)
    if zero:
        torch.save(meta, tmp / META)
    return upload_future(response)


def finish(
    pending: PendingSave,
    agree: Callable[[bool], bool],
    barrier: Callable[[str], None],
    zero: bool,
    swap: Callable[[Path, Path], None],
) -> None:
    """Wait for this rank's write; all ranks agree; rank zero swaps it in; all wait. Raises
    AsyncSaveError (on every rank) when any rank's write failed."""
    error = pending.wait()
    if not agree(error is None):  # a collective: every rank raises, none swaps
        here = f"on this rank: {last_line(error)}" if error else "on another rank"
        raise AsyncSaveError(
            f"the asynchronous checkpoint save of {pending.path} failed ({here}); the previous "
            f"checkpoint there is kept, the partial write left in {pending.tmp}"
        )
    if zero:
        swap(pending.tmp, pending.path)
    barrier("gptlab_dcp_async_done")


def last_line(error: BaseException) -> str:
    """What a failed write raised, in one line: DCP's CheckpointException carries each failing
    rank's traceback, whose last line names the error."""
    lines = [line for line in str(error).splitlines() if line.strip()]
    return lines[-1].strip() if lines else type(error).__name__


def finish_quietly(pending: PendingSave, zero: bool, swap: Callable[[Path, Path], None]) -> None:
    """finish() while an exception unwinds the fit, with no collective on the training thread
    (another rank may be stuck in one of the training's): wait for this rank's write, and rank
    zero swaps it in if its own write succeeded. DCP's coordinator (rank zero) gathers every
    rank's write result and raises when any failed, so its success is everyone's."""
    error = pending.wait()
    if error is not None:
        log.error("asynchronous save of %s failed (%s); kept the previous", pending.path, last_line(error))
        return
    if zero:
        swap(pending.tmp, pending.path)
