"""scripts/plan.py's command line: `plan.<field>=<value>` options apart from train.py's overrides.

The overrides compose conf/train.yaml exactly as train.py does (gptlab.compose); `plan.*` never
reaches Hydra, so train.py's config has no `plan` node and refuses one as it refuses any unknown key.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gptlab.config import TrainConfig
from gptlab.hardware import GPU, lookup
from gptlab.planning.plan import HEADROOM
from gptlab.planning.step import Setup


@dataclass(frozen=True)
class PlanOptions:
    gpu: str | None = None  # plan.gpu=H200 (required)
    tokens: float | None = None  # plan.tokens=10e9: the time to this many training tokens
    mfu: float | None = None  # plan.mfu=0.4; default: the MFU table's row for the GPU and size
    headroom: float = HEADROOM  # plan.headroom=0.21 (the default): fraction of the GPU's memory kept free
    search: bool = False  # plan.search=true: also find the largest micro-batch that fits

    def __post_init__(self) -> None:
        if self.mfu is not None and not (0 < self.mfu <= 1):
            raise ValueError(f"plan.mfu={self.mfu!r} is not accepted; give a fraction in (0, 1], e.g. 0.4")
        if self.tokens is not None and not (math.isfinite(self.tokens) and self.tokens > 0):
            raise ValueError(
                f"plan.tokens={self.tokens!r} is not accepted; give a positive number, e.g. 10e9"
            )
        if not (0 <= self.headroom < 1):
            raise ValueError(f"plan.headroom={self.headroom!r} is not accepted; give a fraction in [0, 1)")

    def the_gpu(self) -> GPU:
        if self.gpu is None:
            from gptlab.hardware import GPUS

            raise ValueError(f"plan.gpu is required; known: {', '.join(GPUS)}")
        return lookup(self.gpu)


def _number(key: str, value: str) -> float:
    try:
        return float(value)
    except ValueError:
        raise ValueError(f"plan.{key}={value!r} is not accepted; give a number") from None


def parse_args(argv: Sequence[str]) -> tuple[PlanOptions, list[str]]:
    """`plan.<field>=<value>` go to PlanOptions (the GPU name checked here); the rest are Hydra
    overrides for conf/train.yaml."""
    names = [f.name for f in dataclasses.fields(PlanOptions)]
    values: dict[str, object] = {}
    overrides = []
    for arg in argv:
        if not arg.startswith(("plan.", "+plan.")):
            overrides.append(arg)
            continue
        key, sep, value = arg.lstrip("+")[len("plan.") :].partition("=")
        if not sep or key not in names:
            raise ValueError(
                f"argument {arg!r} is not accepted; planner options are plan.<field>=<value> with field "
                f"one of {', '.join(names)}"
            )
        value = value.strip("'\"")
        if key == "gpu":
            values[key] = value
        elif key == "search":
            if value.lower() not in ("true", "false"):
                raise ValueError(f"plan.search={value!r} is not accepted; use true or false")
            values[key] = value.lower() == "true"
        else:
            values[key] = _number(key, value)
    opts = PlanOptions(**values)  # type: ignore[arg-type]
    opts.the_gpu()  # an unknown GPU fails before anything is composed or measured
    return opts, overrides


def world_size(cfg: TrainConfig) -> int:
    devices = cfg.trainer.devices
    if isinstance(devices, bool) or not isinstance(devices, int) or devices < 1:
        raise ValueError(
            f"trainer.devices={devices!r} cannot be planned; give the number of GPUs per node, e.g. "
            "trainer.devices=8"
        )
    return devices * cfg.trainer.num_nodes


def setup_from(cfg: TrainConfig) -> Setup:
    """The setup one device of `python train.py <the same overrides>` runs on a GPU machine:
    precision auto is bf16-mixed (every listed GPU has bf16), the model's architecture as train.py
    resolves it (the vocabulary grown to the data's tokenizer; model.init_from reads the
    checkpoint's config.json); the step is a telemetry log step, then the tasks' scoring forward,
    as the run's callbacks configure them (planning.step)."""
    from gptlab.planning.vocab import planned_vocab
    from gptlab.training.app import model_config

    t, tele = cfg.trainer, cfg.callbacks.telemetry
    precision = "bf16-mixed" if t.precision == "auto" else str(t.precision)
    vocab, vocab_source = planned_vocab(cfg.model.vocab_size, cfg.data)
    return Setup(
        model=model_config(cfg, vocab),
        vocab_source=vocab_source,
        optim=cfg.optim,
        micro_batch=cfg.data.batch_size,
        accumulate=t.accumulate_grad_batches,
        world_size=world_size(cfg),
        fsdp=t.strategy == "fsdp",
        precision=precision,
        fsdp_mixed_precision=t.fsdp.mixed_precision,
        reshard_after_forward=t.fsdp.reshard_after_forward,
        log_step=tele.enabled,
        act_rms=tele.act_rms,
        attention=tele.attention,
        task_batch=cfg.callbacks.tasks.batch_size if cfg.callbacks.tasks.names else 0,
        task_tokens=task_tokens(cfg.callbacks.tasks.names, cfg.model.block_size),
        documents=planned_documents(cfg),
    )


def task_tokens(names: list[str], block_size: int) -> int:
    """The longest scoring request of the run's tasks: the built-in val_continuation's context and
    continuation (evaluation/val_task.py), a task file's up to the whole block."""
    from gptlab.evaluation.val_task import DEFAULT, NAME

    longest = [
        DEFAULT.context_tokens + DEFAULT.continuation_tokens if n == NAME else block_size for n in names
    ]
    return min(max(longest, default=0), block_size)


def planned_documents(cfg: TrainConfig) -> dict[str, Any] | None:
    """data.document_mask's record as the run builds it, checked as train.py checks it. The eot's
    value is a placeholder (0): the mask's (B, 1, T, T) size does not depend on it, and finding the
    real id would build the tokenizer (a BPE would train)."""
    from gptlab.data.documents import document_spec

    return document_spec(cfg.data, 0, "the planned tokenizer")
