"""What Hydra knows about the running job, for its loggers and metrics.json: its name, its overrides,
the keys its sweep varies and the tags that follow from them. Each answer has a plain fallback
outside a Hydra app (a test, the benchmark), where HydraConfig is unset."""

from __future__ import annotations

from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import OmegaConf

from gptlab.config import TrainConfig


def run_name(cfg: TrainConfig) -> str:
    """logger.name, else Hydra's override_dirname (the job's overrides), else "default"."""
    if cfg.logger.name:
        return cfg.logger.name
    try:
        return HydraConfig.get().job.override_dirname or "default"
    except ValueError:
        return "default"


def job_overrides() -> list[str]:
    """This job's command-line and sweep overrides, as Hydra recorded them (empty outside Hydra)."""
    try:
        return [str(o) for o in HydraConfig.get().overrides.task]
    except ValueError:
        return []


def swept_keys() -> list[str]:
    """The fields a multirun varies: the sweeper's params (an experiment's grid) plus the sweep
    overrides of its command line (kept in multirun.yaml); the job's override keys when neither
    is known (a sweeper that writes no multirun.yaml, e.g. optuna with only command-line params)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    hydra_cfg = HydraConfig.get()
    keys = [str(k) for k in (hydra_cfg.sweeper.get("params") or {})]
    if hydra_cfg.sweeper.get("arm"):  # the ablation sweeper: its grid is arm × LR × seed
        keys = [str(hydra_cfg.sweeper.arm), "optim.lr", "seed", *keys]
    master = Path(hydra_cfg.sweep.dir) / "multirun.yaml"
    if master.is_file():
        task = OmegaConf.load(master).hydra.overrides.task
        parsed = OverridesParser.create().parse_overrides([str(o) for o in task])
        keys += [o.key_or_group for o in parsed if o.is_sweep_override()]
    if not keys:
        excluded = set(hydra_cfg.job.config.override_dirname.exclude_keys) | {"experiment"}
        keys = [o.split("=", 1)[0].lstrip("+~") for o in job_overrides()]
        keys = [k for k in keys if k not in excluded]
    return list(dict.fromkeys(keys))


def sweep_arm_key() -> str | None:
    """The ablation sweeper's arm key (e.g. model/ffn) in a multirun of one, else None."""
    try:
        arm = HydraConfig.get().sweeper.get("arm")
    except ValueError:
        return None
    return str(arm) if arm else None


def job_tags(cfg: TrainConfig) -> list[str]:
    """logger.tags plus, in a multirun, the experiment's name and the ablated fields, so a
    sweep's runs can be filtered by what they vary."""
    tags = list(cfg.logger.tags)
    try:
        multirun = HydraConfig.get().mode == RunMode.MULTIRUN
    except ValueError:
        return tags
    if not multirun:
        return tags
    if cfg.experiment:
        tags.append(str(cfg.experiment))
    tags += swept_keys()
    return list(dict.fromkeys(tags))  # unique, in order
