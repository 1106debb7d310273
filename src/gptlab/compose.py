"""The one way outside `train.py` to build a run's config: Hydra's compose over conf/train.yaml.

Every entry point that is not a Hydra app (evaluate, bench, params, init report, the tests) composes
through here, so the schema registration, the conf directory and the override grammar are the same
as `python train.py <overrides>` sees.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf, open_dict

from gptlab.config import TrainConfig, register_configs

CONF_DIR = Path(__file__).resolve().parents[2] / "conf"


def _compose(name: str, overrides: Sequence[str], conf_dir: Path | None, hydra_node: bool) -> DictConfig:
    """Hydra's compose of one config name, in a fresh global Hydra: a caller inside another
    initialize() (a test, a Hydra job) must not lend it its search path."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    register_configs()
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(conf_dir or CONF_DIR), version_base="1.3"):
        return compose(config_name=name, overrides=list(overrides), return_hydra_config=hydra_node)


def compose_raw(
    overrides: Sequence[str] = (),
    *,
    conf_dir: Path | None = None,
    with_choices: bool = False,
) -> tuple[DictConfig, dict[str, str]]:
    """conf/train.yaml with the overrides, unvalidated, and the group choices Hydra made
    (`{"model": "pre_rmsnorm_swiglu", ...}`; empty unless `with_choices`)."""
    raw = _compose("train", overrides, conf_dir, with_choices)
    choices: dict[str, str] = {}
    if with_choices:
        choices = {str(k): str(v) for k, v in raw.hydra.runtime.choices.items() if v is not None}
        with open_dict(raw):
            del raw["hydra"]
    return raw, choices


def compose_with_hydra(overrides: Sequence[str] = (), *, conf_dir: Path | None = None) -> DictConfig:
    """conf/train.yaml with the overrides and its `hydra` node (sweeper params, run dirs): what a
    multirun would launch, for checking an experiment preset without launching it."""
    return _compose("train", overrides, conf_dir, True)


def compose_config(overrides: Sequence[str] = (), *, conf_dir: Path | None = None) -> TrainConfig:
    """conf/train.yaml with the overrides, validated by the structured schema (a wrong type, an
    unknown key or a value out of range raises here, as it does in train.py)."""
    raw, _ = compose_raw(overrides, conf_dir=conf_dir)
    return OmegaConf.to_object(raw)  # type: ignore[return-value]


def compose_schema(name: str, values: Mapping[str, Any] | None = None) -> Any:
    """A schema registered by `register_configs` that is not part of conf/train.yaml (the
    benchmark's options), its defaults overlaid with already-typed `values` and validated: an
    unknown key or a wrong type raises OmegaConf's error, a value out of range the schema's own."""
    raw = _compose(name, (), None, False)
    return OmegaConf.to_object(OmegaConf.merge(raw, dict(values or {})))
