"""evaluate.py task=...: read the named task files, score the checkpoint on each, print a table."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from gptlab.checkpoints import load_checkpoint
from gptlab.data.spec import tokenizer_from_spec
from gptlab.evaluation.formats import Item, read_task
from gptlab.evaluation.lm_eval_tasks import EVALUATE, YAML_SUFFIXES, read_yaml_task
from gptlab.evaluation.scoring import choice_loglikelihoods, summarize
from gptlab.evaluation.val_task import measured, val_continuation

# Named tasks built from our corpora: name -> builder(datamodule) -> items. A builder reads the
# configured data's val split through a set-up TokenDataModule (the training run's, or evaluate.py's
# for the checkpoint's data config).
BUILTIN: dict[str, Callable[[Any], list[Item]]] = {"val_continuation": val_continuation}
DEFAULT_BATCH = 16  # requests (context + one choice) per forward
COLUMNS = ("task", "acc", "acc_norm", "items", "chance", "bpb", "cut")
log = logging.getLogger("gptlab.evaluate")


def task_names(spec: str) -> list[str]:
    """task=a.jsonl,b.jsonl -> the names, each a task file or a built-in task."""
    names = [n.strip() for n in spec.split(",") if n.strip()]
    if not names:
        raise ValueError(
            f"task= is empty; accepted: a built-in task ({', '.join(BUILTIN)}), a .jsonl or lm-eval .yaml "
            "task file path, or several separated by commas (docs/evaluation.md)"
        )
    for name in names:
        if name not in BUILTIN and not name.endswith((".jsonl", *YAML_SUFFIXES)) and not Path(name).exists():
            raise ValueError(
                f"task={name!r} is neither a task file nor a known task; accepted: a .jsonl file "
                f"path (HellaSwag or {{context, choices, answer}}), an lm-eval task .yaml "
                f"(multiple_choice; docs/evaluation.md) or a built-in task: {', '.join(BUILTIN)}"
            )
    return names


def load_task(name: str, datamodule: Any | None = None, tool: str = EVALUATE) -> list[Item]:
    """The items of one task: a task file, or a built-in task built from `datamodule`'s val split.

    The one seam every caller goes through (evaluate.py, the in-loop callback, the lm-eval bridge);
    `tool` names the caller in errors about what it scores.
    """
    if name in BUILTIN:
        if datamodule is None:
            raise ValueError(f"task={name!r} is built from a data config's val split; none was given")
        return BUILTIN[name](datamodule)
    if name.endswith(YAML_SUFFIXES):
        return read_yaml_task(name, tool)
    return read_task(name)


def cut_note(name: str, cut: int, n_items: int, block: int) -> tuple[int, str]:
    """(log level, line) for a task whose contexts were cut to fit block_size. The built-in task's
    items all have one length, so a cut is what it measures at that block_size (said, not warned);
    a task file's cut items lost context its author wrote (warned)."""
    if name == "val_continuation":
        return logging.INFO, measured(block)
    return logging.WARNING, (
        f"{name}: {cut} of {n_items} items had their context cut from the left to fit block_size={block}"
    )


def evaluate_tasks(
    ckpt_path: str,
    spec: str,
    batch_size: int | None,
    device: torch.device,
    datamodule_for: Callable[[Any, dict[str, Any]], Any] | None = None,
) -> dict[str, Any]:
    """{"tasks": [(name, metrics)], "block_size": ...}; every file is read and checked before the
    model loads, so a bad line costs no model load and nothing is scored. A built-in task is built
    from `datamodule_for(model, tokenizer spec)`, the checkpoint's data set up (evaluate.py's)."""
    names = task_names(spec)
    files = {name: load_task(name) for name in names if name not in BUILTIN}
    model, tokenizer_record = load_checkpoint(ckpt_path)
    model = model.to(device).eval()
    tokenizer = tokenizer_from_spec(tokenizer_record)
    datamodule = None
    if datamodule_for is not None and len(files) < len(names):
        datamodule = datamodule_for(model, tokenizer_record)
    out = []
    for name in names:
        items = files[name] if name in files else load_task(name, datamodule)
        result = choice_loglikelihoods(model, tokenizer, items, batch_size or DEFAULT_BATCH, device)
        if result.cut:
            level, note = cut_note(name, result.cut, len(items), int(model.cfg.block_size))
            log.log(level, "%s", note)
        out.append((name, summarize(result)))
    return {"tasks": out, "block_size": int(model.cfg.block_size)}


def task_report(ckpt_path: str, result: dict[str, Any]) -> str:
    """One row per task: acc, acc_norm, items, chance, bpb and the items whose context was cut."""
    rows = [COLUMNS] + [
        (
            name,
            f"{m['acc']:.4f}",
            f"{m['acc_norm']:.4f}",
            str(m["items"]),
            f"{m['chance']:.4f}",
            f"{m['bpb']:.4f}",
            str(m["cut"]),
        )
        for name, m in result["tasks"]
    ]
    widths = [max(len(r[k]) for r in rows) for k in range(len(COLUMNS))]
    table = ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    footer = (
        f"acc, acc_norm: argmax of the choices' log-likelihood, raw and per byte; bpb: bits per byte "
        f"of the right continuation; cut: items whose context was cut from the left to fit "
        f"block_size={result['block_size']}"
    )
    return "\n".join([f"checkpoint  {ckpt_path}", *table, footer])
