"""The experiment presets compose, sweep what they claim, and compare like with like."""

from __future__ import annotations

import dataclasses

import pytest
from omegaconf import OmegaConf, open_dict

from gptlab.compose import compose_with_hydra
from gptlab.model import GPT, GPTConfig

GRIDS = {
    "ablate_placement": {"model/placement", "model.n_layer", "optim.warmup_steps"},
    "ablate_ffn": {"model/ffn", "seed"},
    "ablate_tying": {"model/tying", "seed"},
    "ablate_init": {"model.depth_scaled_init", "model.n_layer"},
    "lr_search": {"optim.lr"},
}


def _compose(overrides: list[str]):
    return compose_with_hydra(overrides)


@pytest.mark.parametrize("name", sorted(GRIDS))
def test_experiment_composes_with_its_grid_and_group(name: str) -> None:
    cfg = _compose([f"experiment={name}"])
    assert set(cfg.hydra.sweeper.params) == GRIDS[name]
    assert cfg.experiment == name
    assert OmegaConf.to_container(cfg.logger, resolve=False)["group"].startswith("${experiment}-${now:")
    with open_dict(cfg):
        del cfg["hydra"]
    OmegaConf.to_object(cfg)  # the schema accepts every value the preset sets


def test_lr_search_uses_optuna_log_interval() -> None:
    cfg = _compose(["experiment=lr_search"])
    assert cfg.hydra.sweeper._target_.endswith("OptunaSweeper")
    assert cfg.hydra.sweeper.params["optim.lr"].startswith("tag(log, interval(")


def _ffn_params(cfg: GPTConfig) -> int:
    with __import__("torch").device("meta"):
        model = GPT(cfg)
    return sum(p.numel() for n, p in model.named_parameters() if ".ffn." in n)


def test_ablate_ffn_compares_at_equal_parameters() -> None:
    cfg = _compose(["experiment=ablate_ffn"])
    base = GPTConfig(**OmegaConf.to_container(cfg.model, resolve=True))
    counts = {
        f: _ffn_params(dataclasses.replace(base, ffn=f)) for f in ("swiglu", "gelu", "geglu", "reglu", "relu")
    }
    assert len(set(counts.values())) == 1, counts  # 8/3·d gated = 4·d ungated exactly at d=96
