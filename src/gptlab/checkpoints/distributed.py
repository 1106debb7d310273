"""A distributed (FSDP) checkpoint directory turned into the one consolidated file.

Under trainer=fsdp, Lightning's ModelParallelStrategy saves `last.ckpt/` as a torch.distributed
checkpoint: one shard file per rank, DCP's `.metadata`, and Lightning's `meta.pt` (hyper-parameters,
loop state). Only the model weights are read (not the optimizer state), with DCP's own loader, in
one process (docs/pitfalls.md: `_load_state_dict_from_keys` needs no process group).
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any

import torch

from gptlab.checkpoints.consolidated import write_consolidated
from gptlab.checkpoints.load import model_state_from_checkpoint

LIGHTNING_META = "meta.pt"  # lightning.fabric.utilities.load._METADATA_FILENAME


def read_distributed_checkpoint(directory: Path) -> dict[str, Any]:
    """Lightning's metadata plus the full (unsharded) LightningModule state dict, on the CPU."""
    from torch.distributed.checkpoint.state_dict_loader import _load_state_dict_from_keys

    if not directory.exists():
        raise FileNotFoundError(f"checkpoint directory {str(directory)!r} does not exist")
    if not directory.is_dir():
        raise ValueError(
            f"{str(directory)!r} is a file, not a distributed checkpoint directory; "
            "a single-file .ckpt already works with generate.py as it is"
        )
    missing = [name for name in (".metadata", LIGHTNING_META) if not (directory / name).is_file()]
    if missing:
        raise FileNotFoundError(
            f"{str(directory)!r} lacks {', '.join(missing)}: not a complete distributed checkpoint "
            "written by train.py trainer=fsdp"
        )
    meta = torch.load(directory / LIGHTNING_META, map_location="cpu", weights_only=True)
    with warnings.catch_warnings():  # "assuming ... load in a single process": that is the intent
        warnings.filterwarnings("ignore", message=".*single process", category=UserWarning)
        loaded = _load_state_dict_from_keys(keys={"state_dict"}, checkpoint_id=str(directory))
    return {**meta, "state_dict": loaded["state_dict"]}


def consolidate(directory: str | os.PathLike, out: str | os.PathLike) -> Path:
    """Write the consolidated single file (atomically) and return its path."""
    directory, out = Path(directory), Path(out)
    ckpt = read_distributed_checkpoint(directory)
    # checks names and shapes against the saved GPTConfig and strips the "model." prefix
    cfg, state, tokenizer = model_state_from_checkpoint(ckpt)
    state = {k: v.contiguous() for k, v in state.items()}
    if cfg.tie_embeddings and "lm_head.weight" in state:
        # DCP stores a tied matrix under both names and loads two copies: keep one, shared
        if not torch.equal(state["lm_head.weight"], state["tok_emb.weight"]):
            raise ValueError(
                f"{str(directory)!r}: model.tie_embeddings=True but lm_head.weight differs from "
                "tok_emb.weight in the checkpoint; accepted: a checkpoint whose tied matrices agree"
            )
        state["lm_head.weight"] = state["tok_emb.weight"]
    hparams = ckpt["hyper_parameters"]
    documents = hparams.get("documents")  # data.document_mask: the loaders mask as the run did
    return write_consolidated(
        out, dict(hparams["model"]), state, tokenizer, dict(documents) if documents else None
    )
