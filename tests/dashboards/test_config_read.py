"""Building a view reads each job's .hydra/config.yaml once, with PyYAML's safe loader on libyaml's
parser (keys.SAFE_LOADER; docs/performance.md, "Short runs": the run-end view). Oracle: PyYAML's
pure-Python `yaml.safe_load`, what read the configs before, on every YAML file of conf/ and on configs
Hydra composed and saved (its compose API, OmegaConf.save); and the view file `build` writes for a
run dir and for a sweep whose jobs log different keys equals the file the earlier path writes (each
job's shape read by shape_of from its own file, with yaml.SafeLoader)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

import gptlab.dashboards.keys as keys
import gptlab.dashboards.source as source
from gptlab.config import register_configs
from gptlab.dashboards.cli import build
from tests.conftest import REPO

CONF = REPO / "conf"


def test_the_loader_is_libyamls_and_reads_every_conf_file_as_safe_load_does() -> None:
    assert keys.SAFE_LOADER is yaml.CSafeLoader  # libyaml is in the venv: the fast path is tested
    files = sorted(CONF.rglob("*.yaml"))
    assert len(files) > 100
    for path in files:
        text = path.read_text()
        assert yaml.load(text, Loader=keys.SAFE_LOADER) == yaml.safe_load(text), path


def composed_job(root: Path, overrides: list[str]) -> Path:
    """A job dir as train.py leaves one: Hydra's composed config saved, a wandb run file."""
    register_configs()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose("train", overrides=overrides)
    (root / ".hydra").mkdir(parents=True)
    OmegaConf.save(cfg, root / ".hydra" / "config.yaml")
    run = root / "wandb" / f"offline-run-20261206_000000-{root.name}x"
    run.mkdir(parents=True)
    (run / f"run-{root.name}x.wandb").write_bytes(b"")
    return root


def without_ids(text: str) -> Any:
    """The view file less the library's `__id__`s, which are random per build."""

    def strip(x: Any) -> Any:
        if isinstance(x, dict):
            return {k: strip(v) for k, v in x.items() if k != "__id__"}
        return [strip(v) for v in x] if isinstance(x, list) else x

    return strip(json.loads(text))


@pytest.fixture(scope="module")
def dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("views")
    sweep = root / "sweep"
    composed_job(sweep / "0", ["model.norm=layernorm"])
    composed_job(sweep / "1", ["model.norm=dyt", "model/tying=untied"])  # DyT α and the head's keys
    (sweep / "multirun.yaml").write_text("hydra: {}\n")
    return {"run": composed_job(root / "run", []), "sweep": sweep}


@pytest.mark.parametrize("kind", ["run", "sweep"])
def test_the_view_written_equals_the_one_read_the_earlier_way(
    dirs: dict[str, Path], kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = dirs[kind]
    for job in [target] if kind == "run" else [target / "0", target / "1"]:
        text = (job / ".hydra" / "config.yaml").read_text()
        assert keys.read_config(job) == yaml.safe_load(text)
    written, _ = build(str(target), save="false")
    now = without_ids(written.read_text())
    with monkeypatch.context() as m:  # the earlier path: shape_of reads each job's file itself
        m.setattr(keys, "SAFE_LOADER", yaml.SafeLoader)
        m.setattr(source, "shape_of", lambda job, cfg=None: keys.shape_of(job))
        build(str(target), save="false")
    assert now == without_ids(written.read_text())
    if kind == "sweep":  # the jobs' shapes differ, so a view from one job's config would differ
        assert "dyt_alpha/" in json.dumps(now) and "grad_norm/head" in json.dumps(now)
