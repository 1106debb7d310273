"""Which metric keys a run logs, predicted from its composed config (not read from its logs).

The view names only these keys, so it shows no `attn_*` panel when attention telemetry is off and
no `grad_norm/head` when the embeddings are tied. The telemetry groups come from the model itself:
its parameters are built on the meta device (no memory, no init) and grouped by the telemetry's own
`group_names`; the key formats below follow `telemetry_metrics.reduce_metrics` (docs/architecture.md,
Metric names). A renamed key in telemetry therefore makes this module name a key no run has, which
tests/dashboards/test_view_keys.py catches against real runs' wandb files.
The one key that depends on the machine rather than the config, `throughput/mfu` (a GPU whose peak
is known), is taken when a job's own records show it (`logged_elsewhere`).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from gptlab.model.config import GPTConfig
from gptlab.model.moe_config import EXPERT_KEYS_MAX

BLOCK_FAMILIES = ("update_ratio", "update_rms")  # one key per block_XX
# model/ffn=moe: moe/block_XX/<stat> per MoE layer (training/callbacks/moe_telemetry.py); the bias's
# range only under balance=bias
MOE_STATS = ("max_over_mean_load", "dead_experts", "router_entropy", "aux_loss", "z_loss", "dropped")
MOE_BIAS_STATS = ("bias_min", "bias_max")
# PyYAML's safe loader on libyaml's parser (same constructor and resolver as yaml.SafeLoader)
SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
TASK_METRICS = ("acc", "acc_norm", "bpb")  # task/<name>/<metric>, logged by the in-loop task callback


class ConfigUnreadable(ValueError):
    """A job's .hydra/config.yaml is missing or not a gptlab config: one line."""


@dataclass(frozen=True)
class RunShape:
    """What of a run's config decides its keys."""

    groups: tuple[str, ...]  # telemetry groups: total, embed, block_XX[/attn|/ffn], final_norm, head
    telemetry: bool
    act_rms: bool
    log_steps: bool  # any step Lightning logs (train/loss, skipped steps): max_steps reaches the cadence
    throughput: bool  # its first interval is skipped: max_steps reaches twice the cadence
    attention: bool
    grad_clip: bool
    z_loss: bool
    mfu: bool = False
    dyt_alpha: tuple[str, ...] = ()  # model.norm=dyt: the DyT sites whose α telemetry logs
    tasks: tuple[str, ...] = ()  # the downstream tasks the run evaluates, by their metric names
    moe_blocks: tuple[str, ...] = ()  # model/ffn=moe: the blocks whose FFN is a mixture of experts
    moe_bias: bool = False  # model.moe.balance=bias: the bias's range is logged
    moe_experts: int = 0  # experts per MoE layer whose token counts are logged (0: none, too many)

    @property
    def blocks(self) -> list[str]:
        return [g for g in self.groups if g.startswith("block_") and "/" not in g]


def telemetry_groups(model: dict[str, Any]) -> tuple[str, ...]:
    """The groups LayerTelemetry builds for this model config, from the model's own parameters."""
    import torch

    from gptlab.model.gpt import GPT
    from gptlab.training.callbacks.groups import group_names

    fields = {f.name for f in dataclasses.fields(GPTConfig)}
    cfg = GPTConfig(**{k: v for k, v in model.items() if k in fields and k != "init_from"})
    with torch.device("meta"):
        gpt = GPT(cfg)
    found: set[str] = set()
    for name, _ in gpt.named_parameters():  # a tied matrix appears once, as tok_emb
        found.update(group_names(name))
    order = ["total", "embed"]
    order += [f"block_{i:02d}{s}" for i in range(cfg.n_layer) for s in ("", "/attn", "/ffn")]
    order += ["final_norm", "head"]
    return tuple(g for g in order if g == "total" or g in found)


def dyt_sites(model: dict[str, Any]) -> tuple[str, ...]:
    """The DyT sites (block_XX/<norm>, final_norm) of this model config, in parameter order, as
    telemetry names them; none unless model.norm=dyt."""
    if model.get("norm") != "dyt":
        return ()
    import torch

    from gptlab.model.gpt import GPT
    from gptlab.training.callbacks.telemetry_metrics import dyt_site

    fields = {f.name for f in dataclasses.fields(GPTConfig)}
    cfg = GPTConfig(**{k: v for k, v in model.items() if k in fields and k != "init_from"})
    with torch.device("meta"):
        gpt = GPT(cfg)
    return tuple(site for name, _ in gpt.named_parameters() if (site := dyt_site(name)) is not None)


def moe_blocks(model: dict[str, Any]) -> tuple[str, ...]:
    """The block_XX whose FFN is a mixture of experts (model/ffn=moe, from moe.first_dense_layers on)."""
    if model.get("ffn") != "moe":
        return ()
    first = int((model.get("moe") or {}).get("first_dense_layers") or 0)
    return tuple(f"block_{i:02d}" for i in range(first, int(model.get("n_layer") or 0)))


def expert_keys(model: dict[str, Any]) -> int:
    """How many tokens/expert_YY keys each MoE layer logs (EXPERT_KEYS_MAX at most)."""
    n = int((model.get("moe") or {}).get("n_experts") or 0) if model.get("ffn") == "moe" else 0
    return n if n <= EXPERT_KEYS_MAX else 0


def task_names(cfg: dict[str, Any]) -> tuple[str, ...]:
    """The metric names of the tasks the run's in-loop callback evaluates (issue 38): the block
    `callbacks.tasks` (conf/callbacks/default.yaml; a root `tasks` block is read too), its `names`
    a list or a comma-separated string; a file task is named by its file's stem, a built-in task by
    its name (`hellaswag_val.jsonl` → `hellaswag_val`). None when the block is absent, `enabled`
    is false or `names` is empty (a run made before the callback existed logs no task key)."""
    callbacks = cfg.get("callbacks") if isinstance(cfg.get("callbacks"), dict) else {}
    block = callbacks.get("tasks") if "tasks" in callbacks else cfg.get("tasks")
    if not isinstance(block, dict) or block.get("enabled", True) is False:
        return ()
    names = block.get("names") or []
    if isinstance(names, str):
        names = names.split(",")
    if not isinstance(names, list):
        return ()
    stems = (Path(str(n).strip()).stem for n in names if str(n).strip())
    return tuple(dict.fromkeys(stems))


def read_config(job_dir: Path) -> dict[str, Any]:
    """The job's composed config as Hydra saved it (.hydra/config.yaml)."""
    path = job_dir / ".hydra" / "config.yaml"
    try:  # libyaml's parser when PyYAML has it: the same dict, ~7x less CPU (a run's end reads one)
        cfg = yaml.load(path.read_text(), Loader=SAFE_LOADER)
    except (OSError, yaml.YAMLError) as err:
        raise ConfigUnreadable(
            f"{path} is not readable ({type(err).__name__}); is {job_dir} a gptlab run?"
        ) from None
    if not isinstance(cfg, dict) or not isinstance(cfg.get("model"), dict):
        raise ConfigUnreadable(f"{path} holds no model config; is {job_dir} a gptlab run?")
    return cfg


def logged_elsewhere(job_dir: Path) -> set[str]:
    """Keys the job's own records show: its CSV log's header and wandb's summary file."""
    keys: set[str] = set()
    for csv_file in (job_dir / "csv").glob("metrics*.csv"):
        with open(csv_file) as f:
            keys.update(f.readline().strip().split(","))
    for summary in (job_dir / "wandb").glob("*run-*/files/wandb-summary.json"):
        try:
            keys.update(json.loads(summary.read_text()))
        except (OSError, ValueError):
            pass
    return keys


def shape_of(job_dir: Path, cfg: dict[str, Any] | None = None) -> RunShape:
    """What the job logs, from its config (`cfg`: read_config(job_dir) already read)."""
    cfg = read_config(job_dir) if cfg is None else cfg
    tele = (cfg.get("callbacks") or {}).get("telemetry") or {}
    optim = cfg.get("optim") or {}
    trainer = cfg.get("trainer") or {}
    log_every = int(trainer.get("log_every_n_steps") or 10)
    every = int(tele.get("every_n_steps") or log_every)
    max_steps = trainer.get("max_steps")
    unbounded = not isinstance(max_steps, int) or max_steps < 0

    def reaches(steps: int) -> bool:
        return unbounded or max_steps >= steps

    # Lightning logs step s when (s + 1) % log_every == 0, telemetry when (s + 1) % every == 0: a run
    # shorter than that logs none of those keys (a loss spike forces a telemetry step too, but that
    # is no part of the config); throughput skips its first interval (compilation, warm-up)
    on = bool(tele.get("enabled", True)) and reaches(every)
    return RunShape(
        groups=telemetry_groups(cfg["model"]),
        telemetry=on,
        log_steps=reaches(log_every),
        throughput=reaches(2 * log_every),
        act_rms=on and bool(tele.get("act_rms", True)),
        attention=on and bool(tele.get("attention", True)),
        grad_clip=float(optim.get("grad_clip") or 0) > 0,
        z_loss=float(optim.get("z_loss") or 0) > 0,
        mfu="throughput/mfu" in logged_elsewhere(job_dir),
        dyt_alpha=dyt_sites(cfg["model"]) if on else (),
        moe_blocks=moe_blocks(cfg["model"]) if on else (),
        moe_bias=on and ((cfg["model"].get("moe") or {}).get("balance") == "bias"),
        moe_experts=expert_keys(cfg["model"]) if on else 0,
        tasks=task_names(cfg),  # at every validation or every N steps, and always at the end
    )


def families(shape: RunShape) -> dict[str, list[str]]:
    """Key family → the keys this run logs, in plotting order (blocks input → output)."""
    blocks = shape.blocks
    logs, fast = shape.log_steps, shape.throughput
    out: dict[str, list[str]] = {
        "train": (["train/loss"] if logs else []) + (["train/z_loss"] if logs and shape.z_loss else []),
        "val": ["val/loss", "val/bpb"],
        "tokens": ["tokens_seen"],  # log steps and the last step
        "lr": ["lr"],
        "skipped": ["train/skipped_steps"] if logs else [],
        "throughput": (["throughput/tokens_per_sec", "throughput/step_time"] if fast else [])
        + (["throughput/mfu"] if fast and shape.mfu else []),
        "tasks": [f"task/{t}/{m}" for t in shape.tasks for m in TASK_METRICS],
    }
    if not shape.telemetry:
        return out
    whole = [g for g in shape.groups if "/" not in g and not g.startswith("block_")]
    out["grad_norm/block"] = [f"grad_norm/{b}" for b in blocks]
    out["grad_norm/attn"] = [f"grad_norm/{b}/attn" for b in blocks]
    out["grad_norm/ffn"] = [f"grad_norm/{b}/ffn" for b in blocks]
    out["grad_norm/whole"] = [f"grad_norm/{g}" for g in whole]
    if shape.grad_clip:
        out["clip_coef"] = ["grad_norm/clip_coef"]
    out["param_norm/block"] = [f"param_norm/{b}" for b in blocks]
    out["param_norm/whole"] = [f"param_norm/{g}" for g in whole]
    for family in BLOCK_FAMILIES:
        out[family] = [f"{family}/{b}" for b in blocks]
    if shape.act_rms:
        out["act_rms"] = ["act_rms/embed"] + [f"act_rms/{b}" for b in blocks]
    if shape.attention:
        out["attn_logit_max"] = [f"attn_logit_max/{b}" for b in blocks]
        out["attn_entropy"] = [f"attn_entropy/{b}" for b in blocks]
    out["logits"] = ["logits/mean", "logits/std", "logits/max", "logits/log_z_mean"]
    if shape.dyt_alpha:
        out["dyt_alpha"] = [f"dyt_alpha/{site}" for site in shape.dyt_alpha]
    stats = MOE_STATS + (MOE_BIAS_STATS if shape.moe_bias else ())
    for stat in stats if shape.moe_blocks else ():
        out[f"moe/{stat}"] = [f"moe/{b}/{stat}" for b in shape.moe_blocks]
    for b in shape.moe_blocks if shape.moe_experts else ():
        out[f"moe/tokens/{b}"] = [f"moe/{b}/tokens/expert_{e:02d}" for e in range(shape.moe_experts)]
    return out
