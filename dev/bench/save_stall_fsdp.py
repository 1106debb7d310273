"""The training thread's stall per FSDP2 checkpoint save, synchronous against asynchronous
(`trainer.fsdp.async_save`, issue 43 item 2), on 2 gloo ranks of this machine.

Each rank shards the model as training does (`shard_blocks_then_root`), trains with AdamW on random
tokens, and every `--steps` steps saves what `FSDP2Strategy` saves (the model's and AdamW's shards,
gathered as Lightning gathers them, plus rank zero's meta.pt) into `last/`:
- sync: `torch.distributed.checkpoint.save` into `.last.tmp`, a barrier, rank zero swaps it in, a
  barrier (the strategy's synchronous path);
- async: `dcp_async.finish` of the save before (wait, agree, swap), then `dcp_async.start` (stage a
  host copy, hand the write to DCP's thread); the last save is finished at the end, as at teardown.
A save's stall is the training thread's time inside these calls (state gathering included), rank
zero's clock ("wait": the part spent finishing the save before, i.e. waiting for its write);
"cycle" is the wall time of the save plus the `--steps` steps after it: on a machine
with fewer free cores than ranks the background write takes its CPU from the training steps, which
that shows.
Rounds alternate the two ways. After the run the last asynchronous checkpoint is loaded back and
compared with the state it was taken from (the steps after it must not have leaked in).

    python -m dev.bench.save_stall_fsdp                       # GPT-2 124M: 1.5 GB a checkpoint in all
    python -m dev.bench.save_stall_fsdp --shape tiny --ranks 1 --rounds 1 --saves 2   # the test's
"""

from __future__ import annotations

import argparse
import json
import shutil
import socket
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from dev.bench.save_stall import SHAPES

MODES = ("sync", "async")


def _setup(shape: str) -> tuple[Any, Any]:
    from torch.distributed.device_mesh import init_device_mesh

    from gptlab.model import GPT, GPTConfig
    from gptlab.training.strategies import mixed_precision_policy, shard_blocks_then_root

    torch.manual_seed(0)
    model = GPT(GPTConfig.from_dict(SHAPES[shape]))
    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    shard_blocks_then_root(model, mesh, mixed_precision_policy("32-true", True), True)
    return model, torch.optim.AdamW(model.parameters(), lr=1e-4)


def _step(model: Any, opt: Any, batch: int, block: int, vocab: int) -> None:
    x = torch.randint(0, vocab, (batch, block + 1))
    out = model(x[:, :-1])
    logits = out[0] if isinstance(out, tuple) else out
    loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), x[:, 1:].flatten())
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


def _state(model: Any, opt: Any) -> dict[str, Any]:
    """What ModelParallelStrategy gathers for a distributed save (cpu_offload, sharded)."""
    from torch.distributed.checkpoint.state_dict import (
        StateDictOptions,
        get_model_state_dict,
        get_optimizer_state_dict,
    )

    o = StateDictOptions(full_state_dict=False, cpu_offload=True)
    return {
        "state_dict": get_model_state_dict(model, options=o),
        "optimizer_0": get_optimizer_state_dict(model, opt, options=o),
    }


def _agree(ok: bool) -> bool:
    t = torch.tensor(int(ok))
    dist.all_reduce(t)
    return int(t) == dist.get_world_size()


def _rank(rank: int, args: argparse.Namespace, port: int, out: str) -> None:
    from torch.distributed.checkpoint import save

    from gptlab.training import dcp_async
    from gptlab.training.strategies import swap_in

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=args.ranks)
    model, opt = _setup(args.shape)
    shape = SHAPES[args.shape]
    block, vocab = min(args.block, shape["block_size"]), shape["vocab_size"]
    _step(model, opt, args.batch, block, vocab)  # AdamW's moments exist from here on
    zero, folder, group = rank == 0, Path(out) / "ckpt", dcp_async.save_group()
    path, tmp = folder / "last", folder / ".last.tmp"
    result: dict[str, Any] = {m: {"stall": [], "cycle": [], "wait": []} for m in MODES}
    barrier = lambda _name: dist.barrier()  # noqa: E731
    snapshot: dict[str, torch.Tensor] = {}
    for _ in range(args.rounds):
        for mode in MODES:
            pending = None
            for _ in range(args.saves):
                t0 = time.perf_counter()
                if pending is not None:
                    dcp_async.finish(pending, _agree, barrier, zero, swap_in)
                result[mode]["wait"].append(time.perf_counter() - t0)  # for the save before
                if zero and tmp.exists():
                    shutil.rmtree(tmp)
                dist.barrier()
                state = _state(model, opt)
                meta = {"global_step": 0}
                if mode == "async":
                    future = dcp_async.start(state, meta, tmp, group, zero)
                    pending = dcp_async.PendingSave(future, tmp, path)
                    snapshot = {k: v.to_local().clone() for k, v in state["state_dict"].items()}
                else:
                    save(state, checkpoint_id=tmp)
                    if zero:
                        torch.save(meta, tmp / dcp_async.META)
                    dist.barrier()
                    if zero:
                        swap_in(tmp, path)
                    dist.barrier()
                result[mode]["stall"].append(time.perf_counter() - t0)
                for _ in range(args.steps):  # the training goes on while an async write runs
                    _step(model, opt, args.batch, block, vocab)
                result[mode]["cycle"].append(time.perf_counter() - t0)
            if pending is not None:  # the end of fit: finished in teardown
                t0 = time.perf_counter()
                dcp_async.finish(pending, _agree, barrier, zero, swap_in)
                result[mode]["wait"].append(time.perf_counter() - t0)
                result[mode]["stall"][-1] += time.perf_counter() - t0
                result[mode]["cycle"][-1] += time.perf_counter() - t0
    result["async_equals_its_snapshot"] = _reload_equals(model, opt, path, snapshot)
    if zero:
        result["bytes"] = sum(f.stat().st_size for f in path.iterdir())
        (Path(out) / "result.json").write_text(json.dumps(result))
    dist.destroy_process_group()
    torch.set_num_threads(threads)


def _reload_equals(model: Any, opt: Any, path: Path, snapshot: dict[str, torch.Tensor]) -> bool:
    """The last checkpoint (an asynchronous one) holds the weights of its save, not later ones."""
    from torch.distributed.checkpoint import load

    state = _state(model, opt)
    load(state, checkpoint_id=path)
    same = all(torch.equal(state["state_dict"][k].to_local(), v) for k, v in snapshot.items())
    return bool(_agree(same))


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", choices=sorted(SHAPES), default="gpt2")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--saves", type=int, default=3, help="saves per way and round")
    parser.add_argument("--steps", type=int, default=2, help="training steps before each save")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--block", type=int, default=64, help="tokens per window")
    parser.add_argument("--dir", default=None, help="where to write (default: a temporary folder)")
    parser.add_argument("--ranks", type=int, default=2, help="1: in this process, no spawn (the test)")
    args = parser.parse_args(argv)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.TemporaryDirectory(dir=args.dir) as out:
        if args.ranks == 1:
            _rank(0, args, port, out)
        else:
            mp.start_processes(_rank, args=(args, port, out), nprocs=args.ranks, start_method="spawn")
        result = json.loads((Path(out) / "result.json").read_text())
    result.update(shape=args.shape, steps=args.steps)
    for mode in MODES:
        stall, cycle = result[mode]["stall"], result[mode]["cycle"]
        result[mode].update(median_stall=statistics.median(stall), median_cycle=statistics.median(cycle))
        print(
            f"{mode:<6} stall per save {statistics.median(stall):7.2f} s median "
            f"({', '.join(f'{x:.2f}' for x in stall)}); cycle of {args.steps} steps + save "
            f"{statistics.median(cycle):7.2f} s median"
        )
    waits = result["async"]["wait"]
    print(f"async: of it, waiting for the write before: {', '.join(f'{x:.2f}' for x in waits)} s")
    print(f"checkpoint {result['bytes'] / 1e9:.3f} GB; the async checkpoint equals its snapshot: "
          f"{result['async_equals_its_snapshot']}")  # fmt: skip
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
