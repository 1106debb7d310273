"""Loss, perplexity and bits per byte of a checkpoint on a split, by the training run's validation.

The data config is composed as train.py composes it (gptlab.compose), so the same data overrides
select the same split; the windows scored are the ones the run's validation scores (data.val_windows
of them, 0: all, spread over the split), read through TokenDataModule.eval_dataloader and summed by
gptlab.evaluation.validation. So with the run's data overrides the loss equals its val/loss, and the
batch size does not change it. It lives in training/ because that val path is training's.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from omegaconf import OmegaConf
from tqdm import tqdm

from gptlab.checkpoints import load_checkpoint
from gptlab.compose import compose_raw
from gptlab.data.config import DataConfig
from gptlab.data.datamodule import TokenDataModule
from gptlab.data.paths import resolve_path
from gptlab.data.resolve import resolve
from gptlab.data.spec import same_tokenizer, write_tokenizer
from gptlab.data.tokenizer_files import TOKENIZER_FILE
from gptlab.data.tokenizers import pretrained_file
from gptlab.evaluation.run import BUILTIN, evaluate_tasks, task_names, task_report
from gptlab.evaluation.validation import loss_sum_and_count, val_metrics

SPLITS = ("val", "train")
USAGE = (
    "usage: python evaluate.py ckpt_path=<.ckpt | consolidated file | HF dir> [data=<preset>] "
    "[data.<field>=<value> ...] [split=val|train] [batch_size=N] [device=cpu]; "
    "data.val_windows=N scores N windows spread over the split (0: all); "
    "task=<val_continuation | file.jsonl | lm-eval task .yaml>[,...] scores multiple-choice tasks instead "
    "(docs/evaluation.md)"
)
log = logging.getLogger("gptlab.evaluate")


@dataclass
class EvaluateConfig:
    """evaluate.py's own arguments; everything starting with `data` goes to the Hydra data config."""

    ckpt_path: str = "???"
    split: str = "val"
    batch_size: int | None = None  # None: data.batch_size (the loss does not depend on it)
    device: str = "cpu"
    task: str | None = None  # multiple-choice task files instead of the split's loss


def split_argv(argv: list[str]) -> tuple[list[str], list[str]]:
    """(evaluate.py's own key=value arguments, Hydra overrides of the data config)."""
    own_keys = {f.name for f in dataclasses.fields(EvaluateConfig)}
    own: list[str] = []
    overrides: list[str] = []
    for arg in argv:
        key, sep, value = arg.partition("=")
        if not sep:
            raise ValueError(f"argument {arg!r} is not key=value; {USAGE}")
        if key == "max_batches":
            raise ValueError(
                f"max_batches={value} was replaced by data.val_windows=<windows> (the windows the "
                "run's validation scores, spread over the split; 0: all), as train.py takes it"
            )
        if key in own_keys:
            own.append(arg)
        elif key.lstrip("+~") == "data" or key.lstrip("+~").startswith("data."):
            overrides.append(arg)
        else:
            raise ValueError(
                f"unknown argument {key!r}; accepted: {', '.join(sorted(own_keys))}, data=<preset> "
                "and data.<field>=<value> (the model comes from the checkpoint)"
            )
    return own, overrides


def parse_args(own: list[str]) -> EvaluateConfig:
    """Typed, checked evaluate.py arguments. task= is taken as written (YAML would read `task=,`
    as a syntax error and `task=null` as no task)."""
    tasks = [arg.partition("=")[2] for arg in own if arg.partition("=")[0] == "task"]
    own = [arg for arg in own if arg.partition("=")[0] != "task"]
    merged = OmegaConf.merge(OmegaConf.structured(EvaluateConfig), OmegaConf.from_dotlist(own))
    if tasks:
        merged.task = tasks[-1]
    if OmegaConf.is_missing(merged, "ckpt_path") or not merged.ckpt_path:
        raise ValueError(f"ckpt_path is required; {USAGE}")
    cfg: EvaluateConfig = OmegaConf.to_object(merged)  # type: ignore[assignment]
    if cfg.split not in SPLITS:
        raise ValueError(f"split={cfg.split!r} is not accepted; choose one of {', '.join(SPLITS)}")
    if cfg.batch_size is not None and cfg.batch_size < 1:
        raise ValueError(f"batch_size={cfg.batch_size!r} must be a positive integer (or unset)")
    return cfg


def data_for_checkpoint(data: DataConfig, spec: dict[str, Any]) -> DataConfig:
    """`data` with its tokenizer replaced by the checkpoint's when they differ (never mixed ids).

    When data.tokenizer names another tokenizer, the corpus is re-tokenized (and cached) with the
    checkpoint's own.
    """
    if spec.get("name", "byte") == "byte":
        if data.tokenizer != "byte":
            log.warning(
                "data.tokenizer=%s differs from the checkpoint's byte tokenizer; evaluating on bytes",
                data.tokenizer,
            )
        return dataclasses.replace(data, tokenizer="byte", tokenizer_path=None)
    if not isinstance(spec.get("json"), str):
        raise ValueError(
            f"the checkpoint's tokenizer record {spec.get('name')!r} holds no tokenizer.json text"
        )
    candidate: Path | None = None
    if data.tokenizer == "pretrained":
        candidate = pretrained_file(data.tokenizer_path)
    elif data.tokenizer == "bpe":  # the training run's packed tokens, when they are cached
        cached = resolve(data).entry / TOKENIZER_FILE
        candidate = cached if cached.is_file() else None
    if candidate is not None and same_tokenizer(spec, {"name": "data", "json": candidate.read_text()}):
        return data
    digest = hashlib.sha256(spec["json"].encode()).hexdigest()[:16]
    directory = resolve_path(data.cache_dir) / "tokenizers" / f"checkpoint-{digest}"
    file = write_tokenizer(spec, directory)
    log.info(
        "tokenizing with the checkpoint's tokenizer (%s) instead of data.tokenizer=%s",
        spec.get("name"),
        data.tokenizer,
    )
    return dataclasses.replace(data, tokenizer="pretrained", tokenizer_path=str(file))


def score(model: Any, loader: Any, device: torch.device, desc: str) -> torch.Tensor:
    """[Σ token loss, token count] over the loader's (tokens, weight) batches, as validation sums."""
    totals = torch.zeros(2, dtype=torch.float64)
    bar = tqdm(loader, total=len(loader), desc=desc, unit="batch", disable=None)
    with torch.inference_mode():
        for tokens, weight in bar:
            totals += loss_sum_and_count(model, tokens.to(device), weight.to(device)).cpu()
            bar.set_postfix(loss=f"{float(totals[0] / totals[1]):.4f}")
    bar.close()
    return totals


def torch_device(name: str) -> torch.device:
    """A torch device this machine has."""
    try:
        device = torch.device(name)
    except RuntimeError as e:
        raise ValueError(f"device={name!r} is not a torch device: {e}") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device={name!r} but this machine has no GPU; use device=cpu")
    return device


def compose_data(data_overrides: list[str], batch_size: int | None) -> DataConfig:
    """The data config composed as train.py composes it (a bad override fails here, before any load)."""
    raw, _ = compose_raw(data_overrides)
    data: DataConfig = OmegaConf.to_object(raw.data)  # type: ignore[assignment]
    if batch_size is not None:
        data = dataclasses.replace(data, batch_size=batch_size)
    return data


def checkpoint_datamodule(data: DataConfig, model: Any, spec: dict[str, Any]) -> TokenDataModule:
    """`data` tokenized with the checkpoint's tokenizer and set up for the model's block_size: with
    the run's data overrides, the run's splits."""
    data = data_for_checkpoint(data, spec)
    datamodule = TokenDataModule(data, block_size=model.cfg.block_size, seed=0)
    packed = datamodule.prepare()
    if int(packed.meta["vocab_size"]) > model.cfg.vocab_size:
        raise ValueError(
            f"the tokenizer has {packed.meta['vocab_size']} ids but the model only "
            f"{model.cfg.vocab_size}; accepted: a tokenizer of at most {model.cfg.vocab_size} ids"
        )
    return datamodule


def evaluate_task_spec(
    cfg: EvaluateConfig, data_overrides: list[str], device: torch.device
) -> dict[str, Any]:
    """task=: each task's accuracy (gptlab.evaluation); a built-in task is built from the val
    split of the data config composed with data_overrides, as the loss is."""
    assert cfg.task is not None
    if not any(name in BUILTIN for name in task_names(cfg.task)):
        if data_overrides:
            raise ValueError(
                f"{data_overrides[0]!r} does not apply with task= files (they hold their own text); "
                f"accepted with task=: ckpt_path, batch_size, device, and data.* with a built-in task "
                f"({', '.join(BUILTIN)})"
            )
        return evaluate_tasks(cfg.ckpt_path, cfg.task, cfg.batch_size, device)
    data = compose_data(data_overrides, None)
    return evaluate_tasks(
        cfg.ckpt_path,
        cfg.task,
        cfg.batch_size,
        device,
        lambda model, spec: checkpoint_datamodule(data, model, spec),
    )


def evaluate(cfg: EvaluateConfig, data_overrides: list[str]) -> dict[str, Any]:
    """Mean next-token loss over the split's scored windows, with its perplexity and bits per byte;
    with task=, each task's accuracy instead (gptlab.evaluation)."""
    device = torch_device(cfg.device)
    if cfg.task is not None:
        return evaluate_task_spec(cfg, data_overrides, device)
    data = compose_data(data_overrides, cfg.batch_size)
    model, spec = load_checkpoint(cfg.ckpt_path)
    model = model.to(device).eval()
    datamodule = checkpoint_datamodule(data, model, spec)
    packed = datamodule.prepare()
    data = datamodule.cfg
    loader = datamodule.eval_dataloader(cfg.split)
    totals = score(model, loader, device, f"evaluate {cfg.split}")
    meta = packed.meta
    if cfg.split == "val":
        bytes_per_token = float(meta["bytes_per_token"])
    else:
        bytes_per_token = meta["n_bytes"][cfg.split] / max(1, meta["n_tokens"][cfg.split])
    metrics = val_metrics(totals, bytes_per_token)
    return {
        "loss": float(metrics["val/loss"]),
        "ppl": float(metrics["val/ppl"]),
        "bpb": float(metrics["val/bpb"]),
        "bytes_per_token": bytes_per_token,
        "tokens": int(totals[1]),
        "windows": int(totals[1]) // model.cfg.block_size,
        "split_windows": len(datamodule.dataset(cfg.split)),
        "batches": len(loader),
        "batch_size": data.batch_size,
        "block_size": model.cfg.block_size,
        "tokenizer": packed.tokenizer.name,
        "split": cfg.split,
        "source": data.source,
    }


def report(cfg: EvaluateConfig, result: dict[str, Any]) -> str:
    """The metrics as a small table, one line each."""
    if "tasks" in result:
        return task_report(cfg.ckpt_path, result)
    return "\n".join(
        [
            f"checkpoint  {cfg.ckpt_path}",
            f"data        {result['source']} {result['split']}: {result['windows']} of "
            f"{result['split_windows']} windows in {result['batches']} batches of "
            f"{result['batch_size']} x {result['block_size']} tokens = {result['tokens']} tokens "
            f"({result['tokenizer']}, {result['bytes_per_token']:.4f} bytes/token)",
            f"loss        {result['loss']:.6f}  nats/token",
            f"ppl         {result['ppl']:.6f}",
            f"bpb         {result['bpb']:.6f}  bits/byte",
        ]
    )
